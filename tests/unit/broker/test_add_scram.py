"""`coterie serve --add-scram`: Kafka's `kafka-storage format --add-scram` syntax read into
credentials (coterie.broker.add_scram)."""

from __future__ import annotations

import base64
import hashlib

import pytest
import scramp

from coterie.broker.add_scram import AddScramError, parse_add_scram
from coterie.broker.scram import credential_from_password


def test_a_password_becomes_a_salted_credential_that_logs_in() -> None:
    (user, mechanism), c = parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert (user, mechanism, c.iterations) == ("admin", 2, 4096)  # Kafka's tool's default
    assert len(c.salt) == 32
    # scramp's client logs in against it, as a client over the wire would.
    server = scramp.ScramMechanism("SCRAM-SHA-512").make_server(
        lambda _: (c.salt, c.stored_key, c.server_key, c.iterations))
    client = scramp.ScramClient(["SCRAM-SHA-512"], "admin", "admin-secret")
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())  # raises on a wrong server proof


def test_quoted_values_iterations_and_a_given_salt() -> None:
    salt = b"0123456789abcdef"
    b64 = base64.b64encode(salt).decode()
    key, c = parse_add_scram(f'scram-sha-256=[name="a,b", password="p\\"w", iterations=8192,'
                             f' salt="{b64}"]')
    assert key == ("a,b", 1)
    assert c == credential_from_password(1, 'p"w', 8192, salt)
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    key, c = parse_add_scram(f"SCRAM-SHA-256=[name=bob,salt={b64},"
                             f"saltedpassword={base64.b64encode(salted).decode()}]")
    assert c == credential_from_password(1, "pw", 4096, salt)


@pytest.mark.parametrize(("spec", "why"), [
    ("admin:secret", "expected MECHANISM"),
    ("SCRAM-SHA-1=[name=a,password=b]", "unknown mechanism"),
    ("SCRAM-SHA-256=[password=b]", "a name is needed"),
    ("SCRAM-SHA-256=[name=a]", "a password is needed"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "4096 to 16384"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=many]", "not a number"),
    ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "unknown field"),
    ("SCRAM-SHA-256=[name=a,name=b,password=c]", "given twice"),
    ("SCRAM-SHA-256=[name=a,password=b,salt=]", "the salt is empty"),
    ("SCRAM-SHA-256=[name=a,salt=***,saltedpassword=x]", "not base64"),
    ("SCRAM-SHA-256=[name=a,password=b,saltedpassword=eA==]", "not both"),
])
def test_bad_specs_say_what_is_wrong(spec: str, why: str) -> None:
    with pytest.raises(AddScramError, match=why):
        parse_add_scram(spec)
