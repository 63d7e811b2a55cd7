package plugin

import (
	"fmt"
	"slices"
)

// preferAllocation picks size device indices out of available ∪ must, always including must, so
// that the result spans as few NVLink domains as possible (a gang member's GPUs talk over NVLink; a
// second domain means a slower path). Among equally few domains it prefers the tightest fit, leaving
// whole domains free for later, larger requests. It is deterministic: ties go to the lower domain
// and, within a domain, to the lower device indices. The result is sorted.
//
// The policy, per pool of domains: while devices are still needed, if some domain has enough free
// devices take them from the smallest such domain (best fit); otherwise take all of the largest
// domain and continue. Taking the largest domains until the rest fits into one uses the minimal
// number of domains. Domains already holding a must-include device are drained first, as using them
// adds no domain.
func preferAllocation(domainOf func(int) int, available, must []int, size int) ([]int, error) {
	if size < 0 {
		return nil, fmt.Errorf("allocation size %d is negative", size)
	}
	chosen := map[int]bool{}
	for _, i := range must {
		chosen[i] = true
	}
	pool := map[int]bool{}
	for _, i := range available {
		if !chosen[i] {
			pool[i] = true
		}
	}
	if len(chosen)+len(pool) < size {
		return nil, fmt.Errorf("cannot pick %d devices from %d available", size, len(chosen)+len(pool))
	}
	need := size - len(chosen)

	// free[d] is domain d's candidate devices, ascending.
	free := map[int][]int{}
	for i := range pool {
		free[domainOf(i)] = append(free[domainOf(i)], i)
	}
	for _, devs := range free {
		slices.Sort(devs)
	}
	used := map[int]bool{}
	for i := range chosen {
		used[domainOf(i)] = true
	}
	var inUse, others []int
	for d := range free {
		if used[d] {
			inUse = append(inUse, d)
		} else {
			others = append(others, d)
		}
	}
	take := func(domains []int) {
		for need > 0 && len(domains) > 0 {
			// best: the smallest domain that fits the rest; largest: the one with most devices.
			best, largest := -1, -1
			for k, d := range domains {
				n := len(free[d])
				if n >= need && (best < 0 || n < len(free[domains[best]]) || n == len(free[domains[best]]) && d < domains[best]) {
					best = k
				}
				if largest < 0 || n > len(free[domains[largest]]) || n == len(free[domains[largest]]) && d < domains[largest] {
					largest = k
				}
			}
			k, n := largest, len(free[domains[largest]])
			if best >= 0 {
				k, n = best, need
			}
			for _, i := range free[domains[k]][:n] {
				chosen[i] = true
			}
			need -= n
			domains = slices.Delete(domains, k, k+1)
		}
	}
	take(inUse)
	take(others)

	out := make([]int, 0, len(chosen))
	for i := range chosen {
		out = append(out, i)
	}
	slices.Sort(out)
	return out, nil
}
