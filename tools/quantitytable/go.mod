// Prints how k8s.io/apimachinery's resource.ParseQuantity treats candidate strings,
// the table tests/unit/model/test_quantity_table.py holds policyd's parser to.
// apimachinery is pinned to the version the control-plane build uses (v1.36.3 there).
module policyd/tools/quantitytable

go 1.26.0

require k8s.io/apimachinery v0.36.3

require (
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
)
