"""One HTTP request, printed as JSON: the deploy tests run it with ``nsenter --net`` inside
a started image's network namespace, where the server listens on the image's own port.

    python netns_http.py METHOD URL [--token TOKEN] [--json BODY]
    → {"status": 200, "body": …, "headers": {…}}   (body: JSON when it parses, else text)
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("method")
    parser.add_argument("url")
    parser.add_argument("--token")
    parser.add_argument("--json", dest="body")
    args = parser.parse_args()
    request = urllib.request.Request(args.url, method=args.method)
    if args.token:
        request.add_header("Authorization", f"Bearer {args.token}")
    data = None
    if args.body is not None:
        data = args.body.encode()
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, data=data, timeout=10) as response:
            status, raw, headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        status, raw, headers = exc.code, exc.read(), dict(exc.headers)
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = text
    print(json.dumps({"status": status, "body": body, "headers": headers}))


if __name__ == "__main__":
    main()
