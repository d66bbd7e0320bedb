from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsClaimValidator(OAuth2Validator):
    """Adds preferred_username/name/email and a `groups` claim (Django auth groups).

    `groups` is released with the `openid` scope, so it is always in the ID token
    and in /userinfo.
    """

    oidc_claim_scope = dict(OAuth2Validator.oidc_claim_scope, groups="openid", preferred_username="profile")

    def get_additional_claims(self, request):
        u = request.user
        return {
            "preferred_username": u.username,
            "name": u.get_full_name() or u.username,
            "email": u.email,
            "email_verified": bool(u.email),
            "groups": sorted(u.groups.values_list("name", flat=True)),
        }
