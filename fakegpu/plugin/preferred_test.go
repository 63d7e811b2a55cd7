package plugin

import (
	"slices"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/fakegpu"
)

func TestPreferAllocation(t *testing.T) {
	all := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	twoOf4 := fakegpu.Inventory{Count: 8, NVLinkDomainSize: 4}
	fourOf2 := fakegpu.Inventory{Count: 8, NVLinkDomainSize: 2}
	oneDomain := fakegpu.Inventory{Count: 8}
	for _, tc := range []struct {
		name      string
		inv       fakegpu.Inventory
		available []int
		must      []int
		size      int
		want      []int
		wantErr   string
	}{
		{name: "all free, lowest first", inv: twoOf4, available: all(8), size: 4, want: []int{0, 1, 2, 3}},
		{name: "spread: the one full domain", inv: twoOf4, available: []int{0, 4, 1, 5, 2, 6, 7}, size: 4, want: []int{4, 5, 6, 7}},
		{name: "best fit keeps the full domain", inv: twoOf4, available: []int{1, 2, 3, 4, 5, 6, 7}, size: 2, want: []int{1, 2}},
		{name: "best fit: smallest domain that fits", inv: fourOf2, available: []int{0, 2, 3, 4, 5, 6, 7}, size: 1, want: []int{0}},
		{name: "largest domains first, then best fit", inv: fourOf2, available: []int{0, 2, 3, 4, 5, 7}, size: 3, want: []int{0, 2, 3}},
		{name: "whole node", inv: twoOf4, available: all(8), size: 8, want: all(8)},
		{name: "must include fills its domain first", inv: twoOf4, available: []int{0, 1, 2, 4, 5, 6, 7}, must: []int{0}, size: 4, want: []int{0, 1, 2, 4}},
		{name: "must include in domain 1", inv: twoOf4, available: all(8), must: []int{6}, size: 3, want: []int{4, 5, 6}},
		{name: "must include in two domains", inv: fourOf2, available: all(8), must: []int{1, 6}, size: 3, want: []int{0, 1, 6}},
		{name: "must include is the whole request", inv: twoOf4, available: all(8), must: []int{7, 3}, size: 2, want: []int{3, 7}},
		{name: "must include need not be listed available", inv: twoOf4, available: []int{1}, must: []int{0}, size: 2, want: []int{0, 1}},
		{name: "single domain", inv: oneDomain, available: []int{7, 3, 5}, size: 2, want: []int{3, 5}},
		{name: "size zero", inv: twoOf4, available: all(8), size: 0, want: []int{}},
		{name: "too few available", inv: twoOf4, available: []int{1, 2}, size: 3, wantErr: "cannot pick 3 devices from 2"},
		{name: "negative size", inv: twoOf4, available: all(8), size: -1, wantErr: "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := preferAllocation(tc.inv.DomainOf, tc.available, tc.must, tc.size)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("preferAllocation(%v, must %v, %d) = %v, want %v", tc.available, tc.must, tc.size, got, tc.want)
			}
			// Deterministic: the same answer however the input is ordered.
			rev := slices.Clone(tc.available)
			slices.Reverse(rev)
			again, _ := preferAllocation(tc.inv.DomainOf, rev, tc.must, tc.size)
			if !slices.Equal(got, again) {
				t.Errorf("reversed input gave %v, first %v", again, got)
			}
		})
	}
}

// TestPreferAllocationMinimalDomains checks the policy against brute force: on every availability
// pattern of 8 GPUs in 4 domains of 2, for every size, the pick spans the minimal number of domains.
func TestPreferAllocationMinimalDomains(t *testing.T) {
	inv := fakegpu.Inventory{Count: 8, NVLinkDomainSize: 2}
	domains := func(set []int) int {
		seen := map[int]bool{}
		for _, i := range set {
			seen[inv.DomainOf(i)] = true
		}
		return len(seen)
	}
	for mask := 1; mask < 1<<8; mask++ {
		var avail []int
		for i := range 8 {
			if mask&(1<<i) != 0 {
				avail = append(avail, i)
			}
		}
		for size := 1; size <= len(avail); size++ {
			got, err := preferAllocation(inv.DomainOf, avail, nil, size)
			if err != nil || len(got) != size {
				t.Fatalf("avail %v size %d: %v %v", avail, size, got, err)
			}
			best := 99
			for sub := mask; sub > 0; sub = (sub - 1) & mask {
				var set []int
				for i := range 8 {
					if sub&(1<<i) != 0 {
						set = append(set, i)
					}
				}
				if len(set) == size {
					best = min(best, domains(set))
				}
			}
			if d := domains(got); d != best {
				t.Errorf("avail %v size %d: picked %v in %d domains, minimum is %d", avail, size, got, d, best)
			}
		}
	}
}
