import signal
import threading

from django.apps import AppConfig


class OpSiteConfig(AppConfig):
    name = "opsite"

    def ready(self):
        # SIGHUP = reload signing keys from $OP_DIR/keys without a restart
        # (see rotate-key.sh).  Signal handlers can only be set from the main thread.
        if threading.current_thread() is not threading.main_thread():
            return

        def reload_keys(signum, frame):
            from django.conf import settings
            from oauth2_provider.settings import oauth2_settings

            from opsite.settings import load_keys

            active, inactive = load_keys()
            settings.OAUTH2_PROVIDER["OIDC_RSA_PRIVATE_KEY"] = active
            settings.OAUTH2_PROVIDER["OIDC_RSA_PRIVATE_KEYS_INACTIVE"] = inactive
            oauth2_settings.reload()
            print("opsite: signing keys reloaded", flush=True)

        signal.signal(signal.SIGHUP, reload_keys)
