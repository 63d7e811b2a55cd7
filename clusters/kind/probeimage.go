package kind

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// probeRef is the throwaway image the privilege probe runs when no node image is in the engine yet
// (nothing can be pulled). It is loaded, run and removed by ProbeEngine.
const probeRef = "gangbench.dev/engine-probe:v1"

// trueELF is a complete static x86-64 Linux program that exits 0 (`mov eax, 60; xor edi, edi;
// syscall`): the smallest thing a container can run, built here so the probe needs no image from
// anywhere. Other architectures get no probe image (ProbeEngine then says it could not check).
func trueELF() ([]byte, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("no probe program for %s", runtime.GOARCH)
	}
	code := []byte{0xb8, 0x3c, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05}
	const base, ehsize, phsize = 0x400000, 64, 56
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	b.Write(make([]byte, 8))
	w(uint16(2))                           // ET_EXEC
	w(uint16(62))                          // EM_X86_64
	w(uint32(1))                           // EV_CURRENT
	w(uint64(base + ehsize + phsize))      // entry
	w(uint64(ehsize))                      // phoff
	w(uint64(0))                           // shoff
	w(uint32(0))                           // flags
	w(uint16(ehsize))                      // ehsize
	w(uint16(phsize))                      // phentsize
	w(uint16(1))                           // phnum
	w(uint16(0))                           // shentsize
	w(uint16(0))                           // shnum
	w(uint16(0))                           // shstrndx
	w(uint32(1))                           // PT_LOAD
	w(uint32(5))                           // PF_R|PF_X
	w(uint64(0))                           // offset
	w(uint64(base))                        // vaddr
	w(uint64(base))                        // paddr
	w(uint64(ehsize + phsize + len(code))) // filesz
	w(uint64(ehsize + phsize + len(code))) // memsz
	w(uint64(0x1000))                      // align
	b.Write(code)
	return b.Bytes(), nil
}

// probeImage is the probe program as /bin/true in a one-layer image.
func probeImage() (v1.Image, error) {
	prog, err := trueELF()
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)},
		{Name: "bin/true", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(prog)), ModTime: time.Unix(0, 0)},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(prog); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layer.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/bin/true"}
	return mutate.ConfigFile(img, cf)
}

// EngineProbe is what ProbeEngine found out about running kind nodes.
type EngineProbe struct {
	Engine string
	// Privileged is whether --privileged containers run.
	Privileged bool
	// Args replace --privileged when only they work (nil when Privileged).
	Args []string
	// Err is why kind nodes cannot run at all (a *PrivilegeError), or why the probe could not run.
	Err error
}

// ProbeEngine finds whether engine can run kind nodes, with image if it is in the engine (a node
// image), else with a probe image it loads and removes again.
func ProbeEngine(ctx context.Context, run Runner, engine, image string) EngineProbe {
	pr := EngineProbe{Engine: engine}
	if image == "" || run(ctx, io.Discard, engine, "image", "inspect", image) != nil {
		img, err := probeImage()
		if err != nil {
			pr.Err = fmt.Errorf("cannot check privileges: %w", err)
			return pr
		}
		dir, err := os.MkdirTemp("", "gangbench-probe-")
		if err != nil {
			pr.Err = err
			return pr
		}
		defer os.RemoveAll(dir)
		tag, _ := name.NewTag(probeRef)
		archive := filepath.Join(dir, "probe.tar")
		if err := tarball.WriteToFile(archive, tag, img); err != nil {
			pr.Err = err
			return pr
		}
		if err := run(ctx, io.Discard, engine, "load", "-i", archive); err != nil {
			pr.Err = fmt.Errorf("cannot check privileges: load probe image: %w", err)
			return pr
		}
		defer run(context.WithoutCancel(ctx), io.Discard, engine, "image", "rm", probeRef)
		image = probeRef
	}
	args, err := ProbePrivilege(ctx, run, engine, image)
	pr.Privileged, pr.Args, pr.Err = err == nil && args == nil, args, err
	return pr
}

// Usable says whether kind nodes can run: yes unless the engine refused both ways (a probe that
// could not run at all proves nothing, and Create probes again with the node image).
func (p EngineProbe) Usable() bool {
	var pe *PrivilegeError
	return !errors.As(p.Err, &pe)
}
