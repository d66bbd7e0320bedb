"""manage.py seed SPEC.json  -- idempotently create users, groups and OAuth clients.

SPEC = {
  "users":   [{"username": "alice", "password": "pw", "email": "a@x", "first_name": "Alice",
               "groups": ["fleet-admins"]}],
  "clients": [{"client_id": "fleetset-console", "client_secret": "s3cret",
               "client_type": "confidential",            # or "public"
               "grant": "authorization-code",            # or "urn:ietf:params:oauth:grant-type:device_code"
               "redirect_uris": ["http://127.0.0.1:9000/console/sso/callback"],
               "post_logout_redirect_uris": [], "skip_authorization": true}]
}
"""
import json

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from oauth2_provider.models import get_application_model


class Command(BaseCommand):
    help = "Create/update users, groups and OAuth2/OIDC clients from a JSON spec"

    def add_arguments(self, parser):
        parser.add_argument("spec")

    def handle(self, *args, spec, **opts):
        data = json.load(open(spec))
        for u in data.get("users", []):
            user, _ = User.objects.get_or_create(username=u["username"])
            user.email = u.get("email", "")
            user.first_name = u.get("first_name", "")
            user.last_name = u.get("last_name", "")
            user.is_active = u.get("active", True)
            user.set_password(u["password"])
            user.save()
            user.groups.set([Group.objects.get_or_create(name=g)[0] for g in u.get("groups", [])])
        App = get_application_model()
        for c in data.get("clients", []):
            app = App.objects.filter(client_id=c["client_id"]).first() or App(client_id=c["client_id"])
            app.name = c.get("name", c["client_id"])
            app.client_type = c.get("client_type", "confidential")
            app.authorization_grant_type = c["grant"]
            app.redirect_uris = " ".join(c.get("redirect_uris", []))
            app.post_logout_redirect_uris = " ".join(c.get("post_logout_redirect_uris", []))
            app.skip_authorization = c.get("skip_authorization", True)
            app.algorithm = c.get("algorithm", "RS256")
            if app.client_type == "confidential":
                app.client_secret = c["client_secret"]  # hashed on save
            else:
                app.client_secret = ""
            app.full_clean(exclude=["user", "client_secret"])
            app.save()
        self.stdout.write(f"seeded {len(data.get('users', []))} users, {len(data.get('clients', []))} clients")
