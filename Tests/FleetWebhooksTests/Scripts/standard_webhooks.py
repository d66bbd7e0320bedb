"""Cross-checks fleetset's webhook signatures with the Standard Webhooks reference library.

    standard_webhooks.py verify SECRET ID TIMESTAMP BODY-FILE SIGNATURE   -> prints "verified"
    standard_webhooks.py sign SECRET ID TIMESTAMP BODY-FILE               -> prints the signature
"""
import sys
from datetime import datetime, timezone

from standardwebhooks.webhooks import Webhook


def main(argv):
    command, secret, message_id, timestamp, body_file = argv[1:6]
    with open(body_file, "rb") as f:
        body = f.read()
    hook = Webhook(secret)
    if command == "verify":
        headers = {"webhook-id": message_id, "webhook-timestamp": timestamp, "webhook-signature": argv[6]}
        hook.verify(body, headers)  # raises on a bad signature or an old timestamp
        print("verified")
    elif command == "sign":
        when = datetime.fromtimestamp(int(timestamp), tz=timezone.utc)
        print(hook.sign(message_id, when, body.decode()))
    else:
        raise SystemExit("unknown command " + command)


if __name__ == "__main__":
    main(sys.argv)
