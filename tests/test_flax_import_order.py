"""flax.serialization of a model made before flax was imported (issue 41 item 11): the docs say
importing flax is enough; before, such a model (and its kernel and info) was an opaque leaf of
``to_state_dict`` and ``from_bytes`` could not restore it. A fresh process, so that flax is
certainly not imported before the model is made."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("flax.serialization")

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import jaxrank
    X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
    model = jaxrank.fit_rankrc(X, y, 2.0**-6)
    other = jaxrank.fit_rankrc(X, y, 2.0**-2)  # a template of the same structure
    assert "flax.serialization" not in sys.modules
    import flax.serialization as ser
    state = ser.to_state_dict(model)
    assert isinstance(state, dict) and isinstance(state["kernel"], dict), state
    assert isinstance(state["info"], dict), type(state["info"])
    back = ser.from_bytes(other, ser.to_bytes(model))
    assert type(back) is type(model)
    np.testing.assert_array_equal(back.coef, model.coef)
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
    later = jaxrank.fit_rankrc(X, y, 2.0**-4)  # made after the import: registered as before
    assert isinstance(ser.to_state_dict(later), dict)
    assert not any(type(f).__module__ == "jaxrank._flax" for f in sys.meta_path)
    print("ok")
    """
)


@pytest.mark.slow  # a fresh process
def test_flax_imported_after_the_model_was_made():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")
