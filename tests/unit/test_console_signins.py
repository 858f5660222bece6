"""The web console's sign-ins are bounded per tenant: one tenant signing in again and again
ends only its own oldest sign-ins, never another tenant's."""

from __future__ import annotations

import random
from collections import Counter

from kbus_console.web.signins import SignIns


def test_a_tenant_s_flood_of_sign_ins_ends_only_its_own() -> None:
    rng = random.Random(7101)
    signins = SignIns(most=64, per_tenant=4, idle_s=300)
    quiet = {signins.start(f"token-{t}", t): t for t in ("a", "b", "c")}
    for n in range(2_000):
        tenant = "flood" if rng.random() < 0.9 else rng.choice(["d", "e", "f"])
        signins.start(f"token-{n}", tenant)
        held = Counter(s.tenant for s in signins._held.values())
        assert max(held.values()) <= 4, held
        for cookie, tenant in quiet.items():
            found = signins.of(cookie)
            assert found is not None, (n, tenant)
            assert found.tenant == tenant
