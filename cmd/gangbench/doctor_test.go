package main

import (
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters/kind"
)

func TestKindChecks(t *testing.T) {
	ok := []kind.Prerequisite{
		{Name: "cgroups", OK: true, Detail: "v2"},
		{Name: "debootstrap", OK: true, Detail: "/usr/sbin/debootstrap", ForBuild: true},
	}
	noSeccomp := append(append([]kind.Prerequisite{}, ok...), kind.Prerequisite{Name: "libseccomp", Detail: "pkg-config libseccomp not found",
		Packages: []string{"libseccomp-dev"}, Fix: "apt-get update && apt-get install -y --no-install-recommends libseccomp-dev", ForBuild: true})
	lowDisk := append(append([]kind.Prerequisite{}, ok...), kind.Prerequisite{Name: "disk space", Detail: "3.0 GiB free", Fix: "free space", ForBuild: true, Warning: true})
	noCgroups := []kind.Prerequisite{{Name: "cgroups", Detail: "no cgroup hierarchy", Fix: "mount cgroup2 at /sys/fs/cgroup, or use --provider local"}}
	for _, tc := range []struct {
		name                          string
		ps                            []kind.Prerequisite
		answering, usable, imageCache bool
		verdict, detail, fix          string
	}{
		{name: "ready", ps: ok, answering: true, usable: true, verdict: "yes", detail: "builds the node image"},
		{name: "no engine", ps: ok, verdict: "no", detail: "no container engine answers"},
		{name: "engine refuses", ps: ok, answering: true, verdict: "no", detail: "cannot run kind nodes"},
		// What the user of issue 31 hit: doctor said yes, the build failed on libseccomp.
		{name: "no libseccomp", ps: noSeccomp, answering: true, usable: true, verdict: "no", detail: "missing libseccomp",
			fix: "apt-get update && apt-get install -y --no-install-recommends libseccomp-dev"},
		{name: "low disk warns", ps: lowDisk, answering: true, usable: true, verdict: "yes", detail: "builds the node image"},
		{name: "no libseccomp, image cached", ps: noSeccomp, answering: true, usable: true, imageCache: true, verdict: "yes", detail: "node image is cached"},
		{name: "no cgroups, image cached", ps: noCgroups, answering: true, usable: true, imageCache: true, verdict: "no", detail: "missing cgroups",
			fix: "mount cgroup2 at /sys/fs/cgroup, or use --provider local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := kindChecks(tc.ps, tc.answering, tc.usable, tc.imageCache)
			if len(cs) != len(tc.ps)+1 {
				t.Fatalf("%d lines for %d prerequisites, want one each and the verdict: %+v", len(cs), len(tc.ps), cs)
			}
			for i, p := range tc.ps {
				want := map[bool]string{true: "yes", false: "no"}[p.OK]
				if p.Warning && !p.OK {
					want = "low"
				}
				if c := cs[i]; c.name != "kind: "+p.Name || c.verdict != want || c.fix != p.Fix {
					t.Errorf("line %d = %+v for %+v", i, c, p)
				}
			}
			v := cs[len(cs)-1]
			if v.name != "provider kind" || v.verdict != tc.verdict || !strings.Contains(v.detail, tc.detail) || v.fix != tc.fix {
				t.Errorf("verdict = %+v, want %s containing %q with fix %q", v, tc.verdict, tc.detail, tc.fix)
			}
		})
	}
}

func TestWriteChecksPrintsTheFix(t *testing.T) {
	var b strings.Builder
	writeChecks(&b, []check{{"kind: debootstrap", "no", "not on PATH", "apt-get update && apt-get install -y --no-install-recommends debootstrap"}, {"go toolchain", "yes", "go1.26", ""}})
	want := "kind: debootstrap            no    not on PATH\n" +
		"                                   fix: apt-get update && apt-get install -y --no-install-recommends debootstrap\n" +
		"go toolchain                 yes   go1.26\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
