package fakegpu

import (
	"strings"
	"testing"
)

func TestParseAPI(t *testing.T) {
	for in, want := range map[string]API{"": APIDevicePlugin, "device-plugin": APIDevicePlugin, "dra": APIDRA, "both": APIBoth} {
		if got, err := ParseAPI(in); err != nil || got != want {
			t.Errorf("ParseAPI(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseAPI("cuda"); err == nil || !strings.Contains(err.Error(), `"cuda"`) || !strings.Contains(err.Error(), "device-plugin, dra, both") {
		t.Errorf("ParseAPI(cuda): %v, want an error naming the value and the accepted ones", err)
	}
	for _, c := range []struct {
		api           API
		extended, dra bool
	}{{"", true, false}, {APIDevicePlugin, true, false}, {APIDRA, false, true}, {APIBoth, true, true}} {
		if c.api.ExtendedResource() != c.extended || c.api.DRA() != c.dra {
			t.Errorf("%q: extended %v dra %v, want %v %v", c.api, c.api.ExtendedResource(), c.api.DRA(), c.extended, c.dra)
		}
	}
}

// The devices of a node: one per GPU, named and identified as the device plugin names them, in
// their NVLink domains, the unhealthy ones withdrawn from the end.
func TestDevices(t *testing.T) {
	inv := Inventory{Count: 8, NVLinkDomainSize: 4}.WithDefaults()
	devs := Devices("n", inv, SliceOptions{})
	ids := inv.DeviceIDs("n")
	if len(devs) != 8 {
		t.Fatalf("%d devices, want 8", len(devs))
	}
	for i, d := range devs {
		if d.Name != DeviceName(i) || *d.Attributes[AttrUUID].StringValue != ids[i] || *d.Attributes[AttrIndex].IntValue != int64(i) {
			t.Errorf("device %d: %s uuid %s index %d", i, d.Name, *d.Attributes[AttrUUID].StringValue, *d.Attributes[AttrIndex].IntValue)
		}
		if got, want := *d.Attributes[AttrNVLinkDomain].IntValue, int64(i/4); got != want {
			t.Errorf("device %d: NVLink domain %d, want %d", i, got, want)
		}
		if *d.Attributes[AttrCliqueID].StringValue != "n" {
			t.Errorf("device %d: clique %q, want the node without a topology", i, *d.Attributes[AttrCliqueID].StringValue)
		}
		if m := d.Capacity[CapacityMemory].Value; m.Value() != int64(DefaultMemoryMiB)*1024*1024 {
			t.Errorf("device %d: memory %s", i, m.String())
		}
	}
	if n := len(Devices("n", inv, SliceOptions{Unhealthy: 3})); n != 5 {
		t.Errorf("3 unhealthy: %d devices, want 5", n)
	}
	if n := len(Devices("n", inv, SliceOptions{Unhealthy: 9})); n != 0 {
		t.Errorf("9 unhealthy of 8: %d devices, want 0", n)
	}
	other := Devices("n", Inventory{Count: 1, Product: "X"}.WithDefaults(), SliceOptions{})
	if _, ok := other[0].Capacity[CapacityMemory]; ok {
		t.Error("a product of unknown memory publishes a memory capacity")
	}
	s := ResourceSlice("n", inv, SliceOptions{Generation: 4})
	if s.Spec.Pool.Generation != 4 || s.Spec.Pool.ResourceSliceCount != 1 || s.Labels[LabelManaged] != "true" || s.OwnerReferences != nil {
		t.Errorf("slice pool %+v labels %v owners %v", s.Spec.Pool, s.Labels, s.OwnerReferences)
	}
	if e := DeviceClass().Spec.Selectors[0].CEL.Expression; e != `device.driver == "`+DRADriver+`"` {
		t.Errorf("DeviceClass selector %q", e)
	}
}
