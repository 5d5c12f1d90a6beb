"""DefaultPreemption: kube-scheduler's preemption PostFilter plugin (v1.36 semantics).

`plugin.py` is the plugin (eligibility, the message when preemption cannot help, the
PostFilterResult); `evaluator.py` is upstream's preemption Evaluator (candidate nodes,
dry runs, victims, the choice of node); `pdb.py` counts PodDisruptionBudget violations;
`pod_fields.py` reads the pod fields preemption needs from raw JSON; `args.py` is
DefaultPreemptionArgs.

The plugin decides and never acts: whoever runs the cycle evicts the victims, nominates
the pod and clears the nominations the result lists (see `PostFilterResult`).
"""

# kube-scheduler's name for the plugin (names.DefaultPreemption upstream).
NAME = "DefaultPreemption"
