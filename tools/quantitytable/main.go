// Command quantitytable prints, as JSON, what Kubernetes' own quantity parser
// (k8s.io/apimachinery resource.ParseQuantity) makes of candidate strings: accepted or
// not and, when accepted, the exact decimal value and Value()/MilliValue().
//
// Usage (from this directory; see ../README.md):
//
//	go run . candidates.json > ../../tests/data/quantity_table.json
//
// candidates.json is a JSON list of hand-picked strings (JSON so that tabs, spaces and
// non-ASCII digits are unambiguous); the program adds generated combinations of number
// forms and suffixes, so that every suffix meets every number shape.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"bytes"

	"k8s.io/apimachinery/pkg/api/resource"
)

type row struct {
	Input string `json:"input"`
	OK    bool   `json:"ok"`
	// Error is Go's error text when the input is rejected.
	Error string `json:"error,omitempty"`
	// Decimal is the exact parsed value (inf.Dec's text: no exponent, no suffix).
	Decimal string `json:"decimal,omitempty"`
	// Value and Milli are Quantity.Value() and MilliValue(): what the scheduler keeps
	// for memory and for cpu. Meaningless (wrapped) outside int64, as upstream.
	Value int64 `json:"value"`
	Milli int64 `json:"milli"`
	// Canonical is Quantity.String(), for a reader of the table.
	Canonical string `json:"canonical,omitempty"`
}

// generated returns every number shape with every suffix, plus signs.
func generated() []string {
	numbers := []string{"0", "1", "5", "12", "007", "1.5", "0.1", ".5", "5.", ".",
		"123456789012345678", "1234567890123456789", "0.000000001", "100.0"}
	suffixes := []string{"", "n", "u", "m", "k", "K", "M", "G", "T", "P", "E",
		"Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "ki", "KI", "mi", "e3", "E3", "e-3", "e+3",
		"e", "e-", "i", "µ", "Ki5"}
	var out []string
	for _, sign := range []string{"", "-", "+"} {
		for _, n := range numbers {
			for _, s := range suffixes {
				if sign != "" && s != "" && s != "Ki" && s != "m" && s != "e3" {
					continue // signs only with a few suffixes: the table stays readable
				}
				out = append(out, sign+n+s)
			}
		}
	}
	return out
}

func describe(s string) row {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return row{Input: s, Error: err.Error()}
	}
	r := row{Input: s, OK: true, Canonical: q.String()}
	// Each accessor gets its own parse: AsDec and String may convert q in place.
	v, _ := resource.ParseQuantity(s)
	r.Value = v.Value()
	m, _ := resource.ParseQuantity(s)
	r.Milli = m.MilliValue()
	d, _ := resource.ParseQuantity(s)
	r.Decimal = d.AsDec().String()
	return r
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: quantitytable candidates.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var candidates []string
	if err := json.Unmarshal(data, &candidates); err != nil {
		fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
		os.Exit(2)
	}
	seen := map[string]bool{}
	var rows []row
	for _, s := range append(candidates, generated()...) {
		if !seen[s] {
			seen[s] = true
			rows = append(rows, describe(s))
		}
	}
	// One case per line: the committed table diffs and reads well.
	var buf bytes.Buffer
	buf.WriteString("{\"generator\": \"tools/quantitytable: k8s.io/apimachinery v0.36.3 resource.ParseQuantity\",\n \"cases\": [\n")
	for i, r := range rows {
		line, err := marshal(r)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		buf.WriteString("  ")
		buf.Write(line)
		if i < len(rows)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString(" ]\n}\n")
	os.Stdout.Write(buf.Bytes())
}

// marshal is json.Marshal without HTML escaping (so "<" stays readable).
func marshal(r row) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
