import json

from django.conf import settings
from django.http import JsonResponse
from oauth2_provider.views import ConnectDiscoveryInfoView


class DiscoveryWithDevice(ConnectDiscoveryInfoView):
    """DOT serves RFC 8628 and RFC 7662 but its OIDC discovery lists neither: add them."""

    def get(self, request, *args, **kwargs):
        resp = super().get(request, *args, **kwargs)
        data = json.loads(resp.content)
        data["device_authorization_endpoint"] = settings.ISSUER + "/device-authorization/"
        data["introspection_endpoint"] = settings.ISSUER + "/introspect/"
        data["grant_types_supported"] = [
            "authorization_code",
            "refresh_token",
            "urn:ietf:params:oauth:grant-type:device_code",
        ]
        out = JsonResponse(data)
        out["Access-Control-Allow-Origin"] = "*"
        return out
