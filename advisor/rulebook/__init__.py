"""Rule machinery: rule files -> compiled rules -> fired rule ids -> decisions.

    load.py       rule-file schema, loading, the condition grammar, compilation, revision
    compiled.py   the compiled-rule contract and the limits both engines enforce
    engines/      durable_rules (the only importer of `durable`) and the pure-Python engine
    session.py    one evaluation of a scope, with the per-process engine cache
    actions.py    the closed action set and the `Decisions` the fired rules fold into
    whynot.py     per-leaf "why did this rule not fire"
"""
