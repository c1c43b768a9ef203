"""Reference values from Storm (stormpy, the ``bench`` extra) for the PNML test files.

    .venv/bin/python benchmarks/stormpy_pnml_reference.py

Prints, for tests/srn/data/storm-workflow_cluster.pnml, Storm's long-run probability that
a component is up, and for storm-tiny01.pnml its expected time to a dead marking; the
numbers are recorded in tests/srn/test_srn_pnml.py.  Storm 2.0's PNML reader fails on
``<value>0</value>`` capacities and ``<value>1</value>`` priorities (it strips a
``Default,`` prefix that is not there), so those elements, which carry no semantics here
(capacity 0 = unbounded, priority 1 = the default), are removed from a temporary copy.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import stormpy
import stormpy.gspn

DATA = Path(__file__).resolve().parents[1] / "tests" / "srn" / "data"


def storm_values(name: str, properties: list[str]) -> list[float]:
    text = (DATA / name).read_text(encoding="iso-8859-1")
    text = re.sub(r"<capacity>.*?</capacity>", "", text, flags=re.S)
    text = re.sub(r"<priority>\s*<value>1</value>\s*</priority>", "", text, flags=re.S)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pnml"
        path.write_text(text)
        gspn = stormpy.gspn.load_gspn_file(path)
    jani, _ = stormpy.gspn.build_jani_model(gspn)
    parsed = stormpy.parse_properties(";".join(properties), jani)
    model = stormpy.build_model(jani, parsed)
    print(f"{name}: {model.nr_states} states ({type(model).__name__})")
    values = []
    for prop in parsed:
        value = stormpy.model_checking(model, prop).get_value(model.initial_states[0])
        print(f"  {prop.get_raw_formula()}  {value!r}")
        values.append(float(value))
    return values


def main() -> int:
    storm_values(
        "storm-workflow_cluster.pnml",
        [
            "LRAmax=? [BackboneUp>0]",
            "LRAmax=? [RepairUnitAvailable>0]",
            "LRAmax=? [LeftWorkStationUp>0]",
        ],
    )
    storm_values("storm-tiny01.pnml", ["Tmax=? [F p6+p7>0]"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
