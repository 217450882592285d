"""The gateway's checks of a call's arguments before the call leaves: pure functions its decision calls.

* `schema_errors`: the arguments against the tool's MCP ``inputSchema``, with the maintained ``jsonschema``
  library (the dialect its ``$schema`` names when jsonschema knows it, else Draft 2020-12, the MCP default;
  formats not checked). A schema that is itself invalid, or whose ``$ref`` cannot be resolved, gives one error
  saying the schema cannot be read: the call is refused (fail closed). A ``$ref`` to a URL is never fetched:
  the validator's ``referencing.Registry`` has no retrieval, so only the schema's own definitions and the
  JSON Schema metaschemas resolve. Each error is one line in the gateway's words: the argument's path
  (``arguments.items[2]``) and what is wrong ("must be of type integer, got a string"), never a value.
* `find_secrets`: credentials in argument values and keys, found by detect-secrets' detectors, instantiated
  and run in this process on each whole string (a pasted multi-line private key included), plus, for short
  values, a ``"key": "value"`` line that gives the keyword-anchored detectors their context (an AWS secret key
  under ``aws_secret_access_key``). Used: every detector of a token with a recognisable shape (AWS, private
  keys, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, basic auth in URLs, npm, PyPI, SendGrid, Twilio, Discord,
  Telegram, Mailchimp, Square, Azure storage, Artifactory, Cloudant, IBM, SoftLayer), with detect-secrets' own
  false-positive filters (sequential strings, UUIDs, templates such as ``${TOKEN}``, ``$VARIABLES``). Left out,
  by measurement on benign argument values (tests/test_call_arguments.py): the hex entropy detector (every git
  SHA and content hash fires it), the base64 entropy detector (ULIDs, long paths and URLs, bcrypt hashes, SSH
  public keys, npm integrity hashes fire it), the keyword detector (``secret_santa = "Bob"`` and every
  ``password="testpass"`` in code an agent writes) and the public-IP detector (an address is no credential).
  Their verification (a network request per finding) is never run, and detect-secrets' global settings are
  not touched: the detectors are plain objects, safe to share between threads.
* `secret_paths`: values that name files holding credentials (``~/.ssh/id_rsa``, ``.env``,
  ``.aws/credentials``, ``mcp.json``, ...), matched on path components by `registry.arguments.secret_path_kinds`.

Every path and piece of foreign text in what these return is escaped and capped (`shown`): JSON quoting with
control and non-ASCII characters as escapes, at most 40 characters and "…".

Why before forwarding: a call whose arguments break the tool's schema, or that carries a credential to a
server, is decided by the gateway, not discovered by the server.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from detect_secrets.filters import heuristic
from jsonschema import exceptions as schema_exceptions
from jsonschema import validators
from referencing import Registry
from referencing.exceptions import PointerToNowhere, Unresolvable

from riskrank_jax.registry.arguments import secret_path_kinds
from riskrank_jax.serve.identity import SHOWN_CHARS, shown

SHOWN_DEPTH = 12  # path components shown at most
_KEYED_CHARS = 256  # values up to this long are also scanned as a "key": "value" line (credentials are short)
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def json_path(parts) -> str:
    """The path of an argument from its keys and indices: ``arguments.items[2]``, ``arguments["x y"]``; a key
    that is not a short identifier is shown quoted (`shown`); a path deeper than SHOWN_DEPTH keeps its first and
    last components around "…"."""
    parts = list(parts)
    if len(parts) > SHOWN_DEPTH:
        half = SHOWN_DEPTH // 2
        return json_path(parts[:half]) + "…" + json_path(parts[-half:])[len("arguments"):]
    out = "arguments"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _BARE_KEY.fullmatch(p) and len(p) <= SHOWN_CHARS:
            out += f".{p}"
        else:
            out += f"[{shown(p)}]"
    return out


def _sort_key(parts) -> tuple:
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in parts)


# ------------------------------------------------------------------------------------------------ schema


def _json_type(value) -> str:
    """A short description of a JSON value's type: "a string", "an integer", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def _listed(values, limit: int = 5) -> str:
    shown_values = [shown(json.dumps(v, default=str)) if not isinstance(v, str) else shown(v)
                    for v in list(values)[:limit]]
    more = f" (and {len(values) - limit} more)" if len(values) > limit else ""
    return ", ".join(shown_values) + more


def _number(value) -> str:
    return shown(json.dumps(value, default=str))[1:-1]


_PLAIN = {  # keyword -> what is wrong, from the keyword's value
    "minLength": lambda v: f"must be at least {_number(v)} characters long",
    "maxLength": lambda v: f"must be at most {_number(v)} characters long",
    "minimum": lambda v: f"must be >= {_number(v)}", "maximum": lambda v: f"must be <= {_number(v)}",
    "exclusiveMinimum": lambda v: f"must be > {_number(v)}", "exclusiveMaximum": lambda v: f"must be < {_number(v)}",
    "multipleOf": lambda v: f"must be a multiple of {_number(v)}",
    "minItems": lambda v: f"must have at least {_number(v)} items",
    "maxItems": lambda v: f"must have at most {_number(v)} items",
    "minProperties": lambda v: f"must have at least {_number(v)} properties",
    "maxProperties": lambda v: f"must have at most {_number(v)} properties",
    "pattern": lambda v: f"must match the pattern {shown(v)}",
    "enum": lambda v: f"must be one of {_listed(v)}" if isinstance(v, list) else "is not an allowed value",
    "const": lambda v: f"must be {shown(json.dumps(v, default=str))}",
    "uniqueItems": lambda v: "must not hold duplicate items",
    "anyOf": lambda v: "matches none of the allowed alternatives (anyOf)",
    "oneOf": lambda v: "does not match exactly one of the alternatives (oneOf)",
    "not": lambda v: "matches a schema it must not match (not)",
    "contains": lambda v: "holds no item that matches (contains)",
    "minContains": lambda v: "holds too few items that match (minContains)",
    "maxContains": lambda v: "holds too many items that match (maxContains)",
    "propertyNames": lambda v: "has a property name that is not allowed (propertyNames)",
    "unevaluatedProperties": lambda v: "has properties that are not allowed (unevaluatedProperties: false)",
    "unevaluatedItems": lambda v: "has items that are not allowed (unevaluatedItems: false)",
    "additionalItems": lambda v: "has more items than allowed (additionalItems: false)",
    "items": lambda v: "has more items than allowed (items: false)",
    None: lambda v: "holds a value that is not allowed (a false schema)",  # jsonschema loses its path
}


def _error_lines(error) -> list[tuple[tuple, str]]:
    """(sort key, line) of one jsonschema ValidationError, in the gateway's words."""
    path, instance, v = list(error.absolute_path), error.instance, error.validator_value
    if error.validator == "required" and isinstance(instance, dict):
        return [(_sort_key(path + [p]), f"{json_path(path + [p])} is required")
                for p in v if isinstance(p, str) and p not in instance]
    if error.validator == "dependentRequired" and isinstance(instance, dict):
        return [(_sort_key(path + [p]), f"{json_path(path + [p])} is required when {shown(k)} is given")
                for k, needs in v.items() if k in instance for p in needs if p not in instance]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        known, patterns = set(error.schema.get("properties", {})), list(error.schema.get("patternProperties", {}))
        extra = [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]
        return [(_sort_key(path + [k]), f"{json_path(path + [k])} is not allowed (additionalProperties: false)")
                for k in extra]
    if error.validator == "type":
        types = v if isinstance(v, list) else [v]
        what = " or ".join(str(t) for t in types)
        return [(_sort_key(path), f"{json_path(path)} must be of type {shown(what)[1:-1]}, got "
                                  f"{_json_type(instance)}")]
    if error.validator in ("minimum", "maximum") and isinstance(error.schema, dict) \
            and error.schema.get(f"exclusive{error.validator.title()}") is True:  # draft 4's boolean form
        return [(_sort_key(path), f"{json_path(path)} must be {'>' if error.validator == 'minimum' else '<'} "
                                  f"{_number(v)}")]
    what = _PLAIN.get(error.validator, lambda _: f"is not valid ({shown(str(error.validator))[1:-1]})")(v)
    return [(_sort_key(path), f"{json_path(path)} {what}")]


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str):
    """(a validator for the schema, None) or (None, why the schema cannot be read), cached by its JSON."""
    schema = json.loads(schema_text)
    if not isinstance(schema, (dict, bool)):
        return None, f"the tool's input schema cannot be read (it is {_json_type(schema)}, not an object)"
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except schema_exceptions.SchemaError as e:
        where = "".join(f"/{shown(str(p))[1:-1]}" for p in e.absolute_path) or "/"
        return None, f"the tool's input schema cannot be read (not a valid JSON Schema at {where})"
    except RecursionError:
        return None, "the tool's input schema cannot be read (nested too deeply)"
    return cls(schema, registry=Registry()), None  # no retrieve: a $ref to a URL is an error, never a request


def schema_errors(schema: dict, arguments: dict, limit: int = 5) -> list[str]:
    """What is wrong with ``arguments`` under the tool's ``inputSchema`` ``schema``, one line each, sorted by
    argument path, at most ``limit`` lines plus "... and N more"; [] when they validate.

    Args:
        schema: the tool's MCP ``inputSchema`` (a JSON Schema object).
        arguments: the call's arguments.
        limit: how many errors to list.
    Returns:
        Lines such as "arguments.count must be of type integer, got a string"; a schema that cannot be read
        (invalid, an unresolvable or remote ``$ref``, references without end) gives one line saying so.
    """
    try:
        validator, unreadable = _validator(json.dumps(schema, sort_keys=True, default=str))
    except (TypeError, ValueError):
        validator, unreadable = None, "the tool's input schema cannot be read (it is not JSON)"
    if validator is None:
        return [unreadable]
    try:
        found = sorted({line for e in validator.iter_errors(arguments) for line in _error_lines(e)})
    except Unresolvable as e:  # jsonschema raises its wrapper of referencing's error, a subclass
        cause = e.__cause__ or e
        ref = str(getattr(cause, "ref", None) or "?")
        remote = "" if isinstance(cause, PointerToNowhere) else "; references to URLs are never fetched"
        return [f"the tool's input schema cannot be read ($ref {shown(ref)} is not resolved{remote})"]
    except RecursionError:
        return ["the tool's input schema cannot be read (its references recurse without end)"]
    except Exception as e:  # any other failure of the validator on this schema: refuse the call (fail closed)
        return [f"the tool's input schema cannot be read ({type(e).__name__} while validating)"]
    lines = list(dict.fromkeys(line for _, line in found))
    if len(lines) > limit:
        return lines[:limit] + [f"... and {len(lines) - limit} more"]
    return lines


# ------------------------------------------------------------------------------------------------ secrets


@dataclass(frozen=True, order=True)
class SecretFinding:
    """path: the argument holding it (``arguments.headers.Authorization``, escaped and capped); kind: what was
    found ("AWS Access Key", "Private Key", "secret path: ssh key"), never the value."""

    path: str
    kind: str


@functools.lru_cache(maxsize=1)
def _detectors() -> tuple:
    """One instance of each detect-secrets detector used (module docstring: which, and why not the others)."""
    return tuple(cls() for cls in (
        AWSKeyDetector, ArtifactoryDetector, AzureStorageKeyDetector, BasicAuthDetector, CloudantDetector,
        DiscordBotTokenDetector, GitHubTokenDetector, GitLabTokenDetector, IbmCloudIamDetector, IbmCosHmacDetector,
        JwtTokenDetector, MailchimpDetector, NpmDetector, OpenAIDetector, PrivateKeyDetector, PypiTokenDetector,
        SendGridDetector, SlackDetector, SoftlayerDetector, SquareOAuthDetector, StripeDetector,
        TelegramBotTokenDetector, TwilioKeyDetector))


def _false_positive(secret: str) -> bool:
    """detect-secrets' default filters of a found value: sequences, UUIDs, templates, $VARIABLES, no letter."""
    return (heuristic.is_sequential_string(secret) or heuristic.is_potential_uuid(secret)
            or heuristic.is_templated_secret(secret) or heuristic.is_prefixed_with_dollar_sign(secret)
            or heuristic.is_not_alphanumeric_string(secret))


def secret_kinds(text: str) -> set[str]:
    """The detect-secrets secret types found in ``text``. The whole text is scanned once: every detector used
    is a regular expression that finds a pasted private key's header inside a multi-line text and matches no
    token across a line break (the one anchored at line starts, Artifactory's, also accepts a preceding
    newline), so a scan of each line would find nothing more."""
    return {d.secret_type for d in _detectors()
            if any(not _false_positive(s) for s in d.analyze_string(text) if isinstance(s, str))}


def _strings(arguments):
    """(path parts, text, key or None) of every string value in ``arguments`` and of every key (key texts have
    the key as the last path part), depth first, without recursion."""
    stack = [([], arguments, None)]
    while stack:
        parts, value, key = stack.pop()
        if isinstance(value, str):
            yield parts, value, key
        elif isinstance(value, dict):
            for k, v in value.items():
                yield parts + [str(k)], str(k), None
                stack.append((parts + [str(k)], v, str(k)))
        elif isinstance(value, (list, tuple)):
            stack.extend((parts + [i], v, None) for i, v in enumerate(value))


def find_secrets(arguments) -> list[SecretFinding]:
    """Credentials in ``arguments``' string values and keys (module docstring: the detectors used).

    Args:
        arguments: the call's arguments (any JSON value).
    Returns:
        One `SecretFinding` per (argument path, secret type), sorted, without duplicates; never the value.
    """
    found = {}
    for parts, text, key in _strings(arguments):
        kinds = secret_kinds(text)
        if key is not None and len(text) <= _KEYED_CHARS and "\n" not in text:  # "aws_secret_access_key":
            kinds |= secret_kinds(f'"{key}": "{text}"')  # "..." gives keyword-anchored detectors their context
        found.update(((_sort_key(parts), k), SecretFinding(json_path(parts), k)) for k in kinds)
    return [found[k] for k in sorted(found)]


def secret_paths(arguments) -> list[SecretFinding]:
    """String values and keys of ``arguments`` that name files holding credentials (`secret_path_kinds`).

    Args:
        arguments: the call's arguments (any JSON value).
    Returns:
        One `SecretFinding` per (argument path, kind), kind "secret path: ssh key" and the like, sorted.
    """
    found = {(_sort_key(parts), k): SecretFinding(json_path(parts), f"secret path: {k}")
             for parts, text, _ in _strings(arguments) for k in secret_path_kinds(text)}
    return [found[k] for k in sorted(found)]


__all__ = ["SecretFinding", "find_secrets", "json_path", "schema_errors", "secret_kinds", "secret_paths", "shown"]
