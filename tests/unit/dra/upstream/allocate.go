// Runs kube-scheduler v1.36.3's structured allocator (k8s.io/dynamic-resource-allocation,
// the "incubating" implementation v1.36's default features select) on JSON scenes, one
// per line on stdin, and prints one JSON output per line: the allocation results,
// "nil" (cannot allocate), or the error and whether it concerns only the node, with
// the time the allocation took. Built and driven by record.py; not part of policyd.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

type scene struct {
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Node      *v1.Node                     `json:"node"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
}

type output struct {
	Results   []resourceapi.AllocationResult `json:"results"`
	Nil       bool                           `json:"nil"`
	Error     string                         `json:"error,omitempty"`
	NodeError bool                           `json:"nodeError,omitempty"`
	Millis    float64                        `json:"millis"`
}

type lister map[string]*resourceapi.DeviceClass

func (l lister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l lister) Get(name string) (*resourceapi.DeviceClass, error) {
	c, ok := l[name]
	if !ok {
		return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclass"), name)
	}
	return c, nil
}

func main() {
	structured.EnableAllocators("incubating")
	features := structured.Features{AdminAccess: true, ConsumableCapacity: true, DeviceBindingAndStatus: true,
		DeviceTaints: true, PartitionableDevices: true, PrioritizedList: true}
	cache := cel.NewCache(100, cel.Features{})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<20), 64<<20)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var s scene
		if err := json.Unmarshal(in.Bytes(), &s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		state := structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		}
		for _, c := range s.Allocated {
			if c.Status.Allocation == nil {
				continue
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				if ptr.Deref(r.AdminAccess, false) {
					continue
				}
				id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
				if r.ShareID != nil {
					state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
					if r.ConsumedCapacity != nil {
						state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
					}
					continue
				}
				state.AllocatedDevices.Insert(id)
			}
		}
		classes := lister{}
		for _, c := range s.Classes {
			classes[c.Name] = c
		}
		var out output
		a, err := structured.NewAllocator(context.Background(), features, state, classes, s.Slices, cache)
		if err != nil {
			out.Error = err.Error()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			start := time.Now()
			res, err := a.Allocate(ctx, s.Node, s.Claims)
			out.Millis = float64(time.Since(start).Microseconds()) / 1000
			cancel()
			switch {
			case err != nil:
				out.Error = err.Error()
				out.NodeError = errors.Is(err, structured.ErrFailedAllocationOnNode)
			case res == nil:
				out.Nil = true
			default:
				out.Results = res
			}
		}
		if err := enc.Encode(out); err != nil {
			panic(err)
		}
	}
}
