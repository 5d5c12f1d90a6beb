"""A policy's rules, one module per rule kind of the schema.

`filters/` and `scores/` hold one module per `filters[]` and `scores[]` kind: the rule
compiled once from its spec, bound to a pod, evaluated per node and over a NodeTable
column, and (filters) the cluster events that can undo its rejections; each
package's `schemas.py` declares its kinds' schema fragments, docs rows and examples.
`kinds.py` maps each kind to its class; `normalization.py` turns score rules' raw values into
0..100 and combines them; `applies_to.py` decides which pods a policy applies to.
`policyd/policy/compiler.py` assembles these into a scheduler plugin.
"""
