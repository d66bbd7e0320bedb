from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from .views import DiscoveryWithDevice

urlpatterns = [
    # The provider's own login page: Django's LoginView with the admin login template.
    path("accounts/login/", auth_views.LoginView.as_view(
        template_name="admin/login.html",
        extra_context={"site_header": "Test OpenID Provider", "site_title": "Test OP", "title": "Sign in"},
    ), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    re_path(r"^\.well-known/openid-configuration/?$", DiscoveryWithDevice.as_view()),
    # issuer == http://127.0.0.1:PORT ; /authorize/ /token/ /userinfo/ /.well-known/jwks.json
    # /device-authorization/ /device/ /logout/ ...
    path("", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
