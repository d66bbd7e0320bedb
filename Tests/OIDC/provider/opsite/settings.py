"""Throwaway OpenID Provider = django-oauth-toolkit (DOT) + Django auth.

Everything lives in $OP_DIR (a temp dir): sqlite db, secret key, signing keys.
Env:
  OP_DIR     state dir (required)
  OP_ISSUER  e.g. http://127.0.0.1:18080 (required; must match the URL clients use)
"""
import os
import pathlib
import secrets

OP_DIR = pathlib.Path(os.environ["OP_DIR"]).resolve()
ISSUER = os.environ["OP_ISSUER"].rstrip("/")
KEYS_DIR = OP_DIR / "keys"


def load_keys():
    """active.pem signs; every inactive/*.pem is still published in the JWKS."""
    active = (KEYS_DIR / "active.pem").read_text()
    inactive = [p.read_text() for p in sorted((KEYS_DIR / "inactive").glob("*.pem"))]
    return active, inactive


_sk = OP_DIR / "secret_key"
if not _sk.exists():
    _sk.write_text(secrets.token_urlsafe(50))
SECRET_KEY = _sk.read_text()

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
INSTALLED_APPS = [
    "django.contrib.admin",  # only for its login template (+ optional /admin UI)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
    "opsite.apps.OpSiteConfig",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "opsite.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(OP_DIR / "op.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# The OP is on 127.0.0.1:<port> and the RP on 127.0.0.1:<other port>: cookies are
# per host (not per port), so give the OP's cookies their own names.
SESSION_COOKIE_NAME = "op_sessionid"
CSRF_COOKIE_NAME = "op_csrftoken"

_active, _inactive = load_keys()
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": _active,
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": _inactive,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "PKCE_REQUIRED": True,
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Your name and groups",
        "email": "Your e-mail address",
    },
    "DEFAULT_SCOPES": ["openid"],
    "OAUTH2_VALIDATOR_CLASS": "opsite.validators.GroupsClaimValidator",
    "OAUTH_DEVICE_VERIFICATION_URI": ISSUER + "/device/",
    "DEVICE_FLOW_INTERVAL": int(os.environ.get("OP_DEVICE_INTERVAL", "5")),
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    "ID_TOKEN_EXPIRE_SECONDS": 3600,
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}, "oauth2_provider": {"handlers": ["console"], "level": os.environ.get("OP_LOG_LEVEL", "WARNING")}},
}
