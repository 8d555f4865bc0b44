from hypothesis import given
from hypothesis import strategies as st

from vqarobust.seeding import derive_seed, item_rng


def test_seed_is_stable_across_runs():
    # A fixed value: a change here means every materialized subset changes. Pinned, so
    # that neither the process (hash seed) nor a version of the code can move it.
    assert derive_seed(0, 17, "snow", 3) == 1402833647752319465
    assert derive_seed(0, 17, "snow", 3) != derive_seed(0, 17, "snow", 4)
    assert derive_seed(0, 17, "snow", 3) != derive_seed(1, 17, "snow", 3)


@given(st.integers(0, 2**31), st.integers(0, 10**9), st.text(max_size=20), st.integers(0, 5))
def test_seed_range_and_rng_reproducible(g, image_id, name, severity):
    s = derive_seed(g, image_id, name, severity)
    assert 0 <= s < 2**63
    a = item_rng(g, image_id, name, severity).integers(0, 1000, 5)
    b = item_rng(g, image_id, name, severity).integers(0, 1000, 5)
    assert (a == b).all()
