import json, os, sqlite3, sys, time
D, PORT, RP_PORT = sys.argv[1], sys.argv[2], sys.argv[3]
base = json.load(open("/var/lib/lemonldap-ng/conf/lmConf-1.json"))
iss = f"http://127.0.0.1:{PORT}"
c = {k: v for k, v in base.items() if k in ("cfgVersion", "exportedVars", "demoExportedVars", "userDB", "passwordDB", "portalSkin", "sessionDataToRemember")}
c.update({
    "cfgNum": 1, "cfgAuthor": "test", "cfgDate": str(int(time.time())),
    "authentication": "Demo", "userDB": "Same", "whatToTrace": "uid",
    "portal": iss + "/", "domain": "127.0.0.1", "cookieName": "llngop", "securedCookie": 0,
    "trustedDomains": "127.0.0.1",
    "globalStorage": "Apache::Session::File",
    "globalStorageOptions": {"Directory": f"{D}/sessions", "LockDirectory": f"{D}/sessions/lock"},
    "persistentStorage": "Apache::Session::File",
    "persistentStorageOptions": {"Directory": f"{D}/psessions", "LockDirectory": f"{D}/psessions/lock"},
    "oidcStorage": "Apache::Session::File",
    "oidcStorageOptions": {"Directory": f"{D}/oidc", "LockDirectory": f"{D}/oidc/lock"},
    "localSessionStorage": "Cache::FileCache",
    "localSessionStorageOptions": {"cache_root": f"{D}/cache", "namespace": "llng-sessions", "default_expires_in": 600},
    "notification": 0, "loginHistoryEnabled": 0, "checkUserDisplayPersistentInfo": 0,
    "locationRules": {"127.0.0.1": {"default": "accept"}},
    "issuerDBOpenIDConnectActivation": 1,
    "oidcServiceMetaDataIssuer": iss,
    "oidcServicePrivateKeySig": open(f"{D}/sig.key").read(),
    "oidcServicePublicKeySig": open(f"{D}/sig.pub").read(),
    "oidcServiceKeyIdSig": "key-" + str(int(time.time())),
    "oidcServiceAllowAuthorizationCodeFlow": 1,
    # groups: the Demo backend fills the session's "groups" ("timelords; users") and hGroups
    "oidcRPMetaDataOptions": {"console": {
        "oidcRPMetaDataOptionsClientID": "fleetset-console",
        "oidcRPMetaDataOptionsClientSecret": "console-secret",
        "oidcRPMetaDataOptionsRedirectUris": f"http://127.0.0.1:{RP_PORT}/console/sso/callback",
        "oidcRPMetaDataOptionsIDTokenSignAlg": "RS256",
        "oidcRPMetaDataOptionsRequirePKCE": 1,
        "oidcRPMetaDataOptionsBypassConsent": 1,
        "oidcRPMetaDataOptionsIDTokenForceClaims": 1,
        "oidcRPMetaDataOptionsAccessTokenExpiration": 3600,
    }},
    "oidcRPMetaDataExportedVars": {"console": {
        "name": "cn", "email": "mail", "preferred_username": "uid",
        "groups": "groups;string;always",
    }},
    "oidcRPMetaDataOptionsExtraClaims": {"console": {"groups": "groups"}},
    "oidcRPMetaDataMacros": {"console": {}},
})
# Optional: real user list instead of the 3 built-in Demo users.
# LLNG_USERS=users.json  -> [{"user": "alice", "password": "pw", "name": "Alice", "mail": "a@x", "groups": ["g1","g2"]}]
if os.environ.get("LLNG_USERS"):
    db = sqlite3.connect(f"{D}/users.db")
    db.execute("CREATE TABLE IF NOT EXISTS users (user TEXT PRIMARY KEY, password TEXT, name TEXT, mail TEXT, groups TEXT)")
    for u in json.load(open(os.environ["LLNG_USERS"])):
        db.execute("INSERT OR REPLACE INTO users VALUES (?,?,?,?,?)",
                   (u["user"], u["password"], u.get("name", u["user"]), u.get("mail", ""), "; ".join(u.get("groups", []))))
    db.commit()
    c.update({
        "authentication": "DBI", "userDB": "Same", "passwordDB": "DBI",
        "dbiAuthChain": f"dbi:SQLite:dbname={D}/users.db", "dbiAuthUser": "", "dbiAuthPassword": "",
        "dbiAuthTable": "users", "dbiAuthLoginCol": "user", "dbiAuthPasswordCol": "password",
        "dbiAuthPasswordHash": "",  # clear text (test only)
        "dbiExportedVars": {"cn": "name", "mail": "mail", "uid": "user", "ugroups": "groups"},
    })
    # the claim is multi-valued: LLNG splits on "; " (multiValuesSeparator default)
    c["oidcRPMetaDataExportedVars"]["console"]["groups"] = "ugroups;string;always"
print(json.dumps(c, indent=1))
