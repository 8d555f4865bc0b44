import pytest

from vqarobust.registry import Registry, RegistryClash


def test_register_get_list_create():
    reg: Registry = Registry("thing")

    @reg.register(family="a")
    def alpha(x):
        return x + 1

    @reg.register("beta_blur", family="b")
    def _b(x):
        return x * 2

    assert reg.list() == ["alpha", "beta_blur"]
    assert reg.list("*blur*") == ["beta_blur"]
    assert reg.list(family="a") == ["alpha"]
    assert reg.get("alpha") is alpha
    assert reg.create("beta_blur", 4) == 8
    assert "alpha" in reg and len(reg) == 2


def test_unknown_name_lists_known_ones():
    reg: Registry = Registry("corruption")
    reg.register("snow")(lambda: None)
    with pytest.raises(KeyError, match="unknown corruption 'fog'; known: snow"):
        reg.get("fog")


def test_duplicate_name_is_an_error_naming_both_modules():
    reg: Registry = Registry("thing")
    reg.register("x")(lambda: None)
    here = "module tests.test_registry"
    both = f"thing 'x' of {here} clashes with the one of {here}"
    with pytest.raises(RegistryClash, match=both):
        reg.register("x")(lambda: None)
    builtin = lambda: None  # noqa: E731
    builtin.__module__ = "vqarobust.corruptions.noise"
    reg.register("y")(builtin)
    with pytest.raises(RegistryClash, match=r"with the one of built-in \(vqarobust.corruptions"):
        reg.register("y")(lambda: None)


def test_create_passes_a_name_keyword_through():
    reg: Registry = Registry("thing")
    reg.register("f")(lambda name: name)
    assert reg.create("f", name="inner") == "inner"
