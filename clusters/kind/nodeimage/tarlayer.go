package nodeimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is every generated file's mtime, so a layer's digest depends on its content alone.
func epoch() time.Time { return time.Unix(0, 0).UTC() }

// entry is one file of a layer made in memory: a directory (Dir), a symlink (Link) or a regular
// file (Data, or the file at From on this machine).
type entry struct {
	Path string // absolute inside the image, e.g. /usr/bin/kubelet
	Mode int64
	Dir  bool
	Link string
	Data []byte
	From string
}

func dirEntry(p string) entry { return entry{Path: p, Mode: 0o755, Dir: true} }
func fileEntry(p string, mode int64, data []byte) entry {
	return entry{Path: p, Mode: mode, Data: data}
}
func copyEntry(p string, mode int64, from string) entry {
	return entry{Path: p, Mode: mode, From: from}
}
func linkEntry(p, target string) entry { return entry{Path: p, Mode: 0o777, Link: target} }

// writeEntries writes a tar of es, adding the parent directories each entry needs (0755) so that
// the layer extracts the same way anywhere. Entries are sorted by path for a stable digest.
func writeEntries(w io.Writer, es []entry) error {
	byPath := map[string]entry{}
	for _, e := range es {
		p := path.Clean("/" + e.Path)
		e.Path = p
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = dirEntry(d)
			}
		}
		byPath[p] = e
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		e := byPath[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: e.Mode, ModTime: epoch(), Format: tar.FormatPAX}
		var data []byte
		switch {
		case e.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		case e.From != "":
			b, err := os.ReadFile(e.From)
			if err != nil {
				return fmt.Errorf("layer file %s: %w", p, err)
			}
			data = b
		default:
			data = e.Data
		}
		if !e.Dir && e.Link == "" {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer file %s: %w", p, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("layer file %s: %w", p, err)
		}
	}
	return tw.Close()
}

// entriesLayer is a layer made of es, built in memory (only used for small layers: binaries are
// read when the layer is written, once).
func entriesLayer(es []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := writeEntries(&buf, es); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
}

// fileLayer is a layer from a gzipped tar file on disk (used as is, not compressed again).
func fileLayer(p string) (v1.Layer, error) {
	return tarball.LayerFromFile(p)
}

// tarTree writes the directory tree root as a gzipped tar at out, with paths relative to root and
// prefixed by prefix ("" or e.g. "var/lib/containerd"). Owners, modes, symlinks and hard links are
// kept; the contents of skip (paths relative to root: "dev", "proc") are left out, their directories
// kept. Device nodes, sockets and fifos are left out: a container engine makes /dev itself.
func tarTree(root, prefix, out string, skip []string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		f.Close()
		return err
	}
	tw := tar.NewWriter(zw)
	links := map[[2]uint64]string{} // (dev, inode) of a multiply-linked file -> first name
	werr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		for _, s := range skip {
			if strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		link := ""
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		h.Name = path.Join(prefix, filepath.ToSlash(rel))
		if d.IsDir() {
			h.Name += "/"
		}
		h.Format = tar.FormatPAX
		h.Uname, h.Gname = "", ""
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
			if mode.IsRegular() && st.Nlink > 1 {
				key := [2]uint64{uint64(st.Dev), st.Ino}
				if first, seen := links[key]; seen {
					h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				} else {
					links[key] = h.Name
				}
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		return err
	})
	for _, c := range []io.Closer{tw, zw, f} {
		if err := c.Close(); werr == nil {
			werr = err
		}
	}
	if werr != nil {
		os.Remove(out)
		return fmt.Errorf("tar %s: %w", root, werr)
	}
	return nil
}
