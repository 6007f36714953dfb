"""The JAAS login configuration file Kafka's broker reads, for its SASL/PLAIN users.

Kafka takes the file's path from the JVM property `java.security.auth.login.config`; coterie
has no JVM, so it takes the same path from a broker setting of that very name (in
`server.properties` or `--override`). The file is Java's login configuration syntax, which
operators already have for their Kafka brokers:

    KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";
    };
    sasl_ssl.KafkaServer { ... };

Sections (`Name { entries };`), each entry a login module's class, its flag (required,
requisite, sufficient, optional) and `key=value` options, ended by `;`. Values are quoted
(`"` or `'`, with backslash escapes) or bare words; `//` and `/* */` are comments, as Java's
parser reads them. What Kafka would silently misread is refused here with the line it is on:
the file is read once at start, and a broker that started with half its users is worse than
one that says why it does not start.

`${property}` expansion (Java's) is not done: a value is taken as written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FLAGS", "PLAIN_LOGIN_MODULE", "JaasError", "LoginModule", "parse_jaas",
           "read_jaas_file", "section_users"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_PUNCTUATION = "{};="
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasError(ValueError):
    """A JAAS file that cannot be read as Java reads it: what is wrong, and on which line."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    """One entry of a section: the login module's class, its flag and its options."""

    name: str
    flag: str
    options: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    line: int
    quoted: bool = False


def _tokens(text: str) -> Iterator[_Token]:
    """Words, quoted strings and the punctuation `{ } ; =`, without blanks and comments."""
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError(f"line {line}: a /* comment is not closed")
            line += text.count("\n", i, end)
            i = end + 2
        elif c in "\"'":
            start_line, out, i = line, [], i + 1
            while True:
                if i >= n:
                    raise JaasError(f"line {start_line}: a quoted value is not closed")
                ch = text[i]
                if ch == c:
                    i += 1
                    break
                if ch == "\\" and i + 1 < n:
                    i += 1
                    ch = _ESCAPES.get(text[i], text[i])
                if ch == "\n":
                    line += 1
                out.append(ch)
                i += 1
            yield _Token("".join(out), start_line, quoted=True)
        elif c in _PUNCTUATION:
            yield _Token(c, line)
            i += 1
        else:
            start = i
            while (i < n and not text[i].isspace() and text[i] not in _PUNCTUATION
                   and text[i] not in "\"'" and not text.startswith(("//", "/*"), i)):
                i += 1
            yield _Token(text[start:i], line)


class _Parser:
    """Java's login-configuration grammar over `_tokens` (module docstring)."""

    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._next: _Token | None = next(self._tokens, None)

    def _take(self, what: str) -> _Token:
        token = self._next
        if token is None:
            raise JaasError(f"the file ends where {what} was expected")
        self._next = next(self._tokens, None)
        return token

    def _expect(self, punctuation: str, after: str) -> None:
        token = self._take(f"'{punctuation}' after {after}")
        if token.quoted or token.text != punctuation:
            raise JaasError(f"line {token.line}: expected '{punctuation}' after {after}, "
                            f"found {token.text!r}")

    def _word(self, what: str) -> _Token:
        token = self._take(what)
        if not token.quoted and token.text in _PUNCTUATION:
            raise JaasError(f"line {token.line}: expected {what}, found {token.text!r}")
        return token

    def _at(self, punctuation: str) -> bool:
        token = self._next
        return token is not None and not token.quoted and token.text == punctuation

    def sections(self) -> dict[str, tuple[LoginModule, ...]]:
        found: dict[str, list[LoginModule]] = {}
        while self._next is not None:
            name = self._word("a section name (KafkaServer)").text
            self._expect("{", f"section name {name}")
            entries = found.setdefault(name, [])  # a name given twice: its entries add up
            while not self._at("}"):
                entries.append(self._entry(name))
            self._take("'}'")
            self._expect(";", f"the '}}' of section {name}")
        return {name: tuple(entries) for name, entries in found.items()}

    def _entry(self, section: str) -> LoginModule:
        module = self._word(f"a login module's class in section {section}")
        flag = self._word(f"the flag of {module.text}")
        if flag.quoted or flag.text.lower() not in FLAGS:
            raise JaasError(f"line {flag.line}: {module.text} needs a flag (required, "
                            f"requisite, sufficient or optional), found {flag.text!r}")
        options: dict[str, str] = {}
        while not self._at(";"):
            key = self._word(f"an option of {module.text} or ';'")
            self._expect("=", f"option {key.text}")
            options[key.text] = self._word(f"the value of option {key.text}").text
        self._take("';'")
        return LoginModule(module.text, flag.text.lower(), options)


def parse_jaas(text: str) -> dict[str, tuple[LoginModule, ...]]:
    """The sections of a JAAS login configuration, by name, each with its login modules in
    order. JaasError says what is malformed and where."""
    return _Parser(text).sections()


def read_jaas_file(path: str | Path) -> dict[str, tuple[LoginModule, ...]]:
    """A JAAS file's sections (parse_jaas); JaasError, naming the file, when it cannot be
    read or parsed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise JaasError(f"cannot read the JAAS file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise JaasError(f"the JAAS file {path} is not UTF-8 text: {e.reason}") from None
    try:
        return parse_jaas(text)
    except JaasError as e:
        raise JaasError(f"the JAAS file {path}: {e}") from None


def section_users(entries: tuple[LoginModule, ...]) -> dict[str, str]:
    """The PLAIN users of a section: the `user_<name>` options of its PlainLoginModule
    entries (the first entry naming a user wins, as Kafka's callback handler looks them
    up); other modules' options are theirs, not users."""
    users: dict[str, str] = {}
    for entry in entries:
        if entry.name != PLAIN_LOGIN_MODULE:
            continue
        for key, value in entry.options.items():
            if key.startswith("user_") and len(key) > 5:
                users.setdefault(key[5:], value)
    return users
