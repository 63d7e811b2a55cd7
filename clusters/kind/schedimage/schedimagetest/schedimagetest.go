// Package schedimagetest makes stand-ins for kube-scheduler binaries in tests: a real static
// executable that answers --version like kube-scheduler (it is run by k8sbin.ProbeKubeVersion), and
// an ELF that declares an interpreter, as a dynamically linked binary does.
package schedimagetest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// fakeMain prints what kube-scheduler prints for --version, and fails otherwise: the image code
// only ever asks for the version.
const fakeMain = `package main

import (
	"fmt"
	"os"
)

var version = "unset"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("Kubernetes " + version)
		return
	}
	fmt.Fprintln(os.Stderr, "fake kube-scheduler: only --version is implemented")
	os.Exit(2)
}
`

// StaticScheduler compiles a static (CGO_ENABLED=0) linux binary for this machine that prints
// "Kubernetes <version>" for --version, and returns its path in a new temporary directory.
func StaticScheduler(t testing.TB, version string) string {
	t.Helper()
	src := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":  "module example.com/fakescheduler\n\ngo 1.26\n",
		"main.go": fakeMain,
	} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "kube-scheduler")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build fake kube-scheduler: %v\n%s", err, b)
	}
	return out
}

// Machine is the ELF machine of runtime.GOARCH (x86-64 for an architecture this does not know).
func Machine() elf.Machine {
	switch runtime.GOARCH {
	case "arm64":
		return elf.EM_AARCH64
	case "ppc64le":
		return elf.EM_PPC64
	case "s390x":
		return elf.EM_S390
	}
	return elf.EM_X86_64
}

// WriteELF writes a minimal 64-bit little-endian ELF executable header for machine to path (mode
// 0755): with a PT_INTERP program header naming interp when interp is not empty, as a dynamically
// linked binary has, else with no program header at all. It cannot run; it is for checks that read
// the ELF.
func WriteELF(t testing.TB, path string, machine elf.Machine, interp string) string {
	t.Helper()
	const ehsize, phentsize = 64, 56
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Entry: 0x400000, Ehsize: ehsize, Phentsize: phentsize, Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var progs []elf.Prog64
	var tail []byte
	if interp != "" {
		tail = append([]byte(interp), 0)
		h.Phoff, h.Phnum = ehsize, 1
		progs = append(progs, elf.Prog64{
			Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Off: ehsize + phentsize,
			Vaddr: 0x400000 + ehsize + phentsize, Paddr: 0x400000 + ehsize + phentsize,
			Filesz: uint64(len(tail)), Memsz: uint64(len(tail)), Align: 1,
		})
	}
	var buf bytes.Buffer
	for _, v := range []any{h, progs} {
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	buf.Write(tail)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
