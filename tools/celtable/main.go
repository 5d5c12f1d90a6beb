// Command celtable prints, as JSON, what kube-scheduler's CEL for DRA device selectors
// (k8s.io/dynamic-resource-allocation/cel, the cache the DynamicResources plugin builds,
// v1.36 default features) makes of each case in a JSON file: the compile error, or the
// match or runtime error for the case's device, and the worst-case cost estimate the
// API server computes. tests/unit/cel/test_upstream_table.py holds policyd/cel to it.
//
// Usage (from this directory; see ../README.md):
//
//	go run . cases.json > ../../tests/unit/cel/data/upstream_table.json
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type input struct {
	Name       string             `json:"name"`
	Expression string             `json:"expression"`
	Driver     string             `json:"driver"`
	Device     resourceapi.Device `json:"device"`
}

type output struct {
	input
	CompileError string  `json:"compileError,omitempty"`
	Match        *bool   `json:"match,omitempty"`
	RuntimeError string  `json:"runtimeError,omitempty"`
	MaxCost      *uint64 `json:"maxCost,omitempty"`
}

func main() {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var cases []input
	if err := json.Unmarshal(raw, &cases); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// kube-scheduler v1.36 defaults: DRAConsumableCapacity on, DRAListTypeAttributes off.
	features := dracel.Features{EnableConsumableCapacity: true}
	cache := dracel.NewCache(10, features)
	var out []output
	for _, c := range cases {
		o := output{input: c}
		result := cache.GetOrCompile(c.Expression)
		if result.Error != nil {
			o.CompileError = result.Error.Error()
			out = append(out, o)
			continue
		}
		estimated := dracel.GetCompiler(features).CompileCELExpression(c.Expression, dracel.Options{})
		if estimated.Error == nil {
			o.MaxCost = &estimated.MaxCost
		}
		match, _, err := result.DeviceMatches(context.Background(), dracel.Device{
			Driver:                   c.Driver,
			AllowMultipleAllocations: c.Device.AllowMultipleAllocations,
			Attributes:               c.Device.Attributes,
			Capacity:                 c.Device.Capacity,
		})
		if err != nil {
			o.RuntimeError = err.Error()
		} else {
			o.Match = &match
		}
		out = append(out, o)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
