package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/gangbench/gangbench/clusters"
)

// A cluster's components are children of the process that created it, and only that process can
// restart them with their flags (and wait for them: they are its children). A cluster held by a
// detached owner (`gangbench cluster create`, or `gangbench e2e --keep-cluster`, which creates its
// cluster through such a holder so that it outlives the run) must still take faults from the
// suites, which run in another process. So the holder serves its ComponentControl on a unix socket
// in the cluster's directory (mode 0700, so only this user reaches it), and Get hands other
// processes a ComponentControl that asks the holder. One JSON request and one JSON reply per
// connection: the operations are few, slow (a restart waits for readiness) and never concurrent
// within one caller.

// controlSocket is the holder's control socket of the cluster in dir.
func controlSocket(dir string) string { return filepath.Join(dir, "control.sock") }

type controlRequest struct {
	Op        string             `json:"op"`
	Component clusters.Component `json:"component"`
}

type controlReply struct {
	Error string `json:"error,omitempty"`
}

// controlServer serves ctl on a listener until close.
type controlServer struct {
	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// serveControl listens on path and serves ctl there.
func serveControl(path string, ctl clusters.ComponentControl) (*controlServer, error) {
	_ = os.Remove(path) // a socket left by a holder that was killed
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &controlServer{ln: ln, cancel: cancel}
	s.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed
			}
			s.wg.Go(func() { handleControl(ctx, conn, ctl) })
		}
	})
	return s, nil
}

func handleControl(ctx context.Context, conn net.Conn, ctl clusters.ComponentControl) {
	defer conn.Close()
	var req controlRequest
	if err := json.NewDecoder(conn).Decode(&req); err != nil {
		_ = json.NewEncoder(conn).Encode(controlReply{Error: fmt.Sprintf("bad control request: %v", err)})
		return
	}
	var err error
	if _, perr := clusters.ParseComponent(string(req.Component)); perr != nil {
		err = perr
	} else {
		switch req.Op {
		case "stop":
			err = ctl.Stop(ctx, req.Component)
		case "kill":
			err = ctl.Kill(ctx, req.Component)
		case "start":
			err = ctl.Start(ctx, req.Component)
		case "restart":
			err = ctl.Restart(ctx, req.Component)
		default:
			err = fmt.Errorf("control op %q: accepted stop, kill, start, restart", req.Op)
		}
	}
	var rep controlReply
	if err != nil {
		rep.Error = err.Error()
	}
	_ = json.NewEncoder(conn).Encode(rep)
}

// close stops accepting, cancels operations in flight and waits for their handlers.
func (s *controlServer) close() {
	if s == nil {
		return
	}
	_ = s.ln.Close()
	s.cancel()
	s.wg.Wait()
}

// remoteControl is the ComponentControl of a cluster held by another process: it asks the holder.
type remoteControl struct{ path string }

var _ clusters.ComponentControl = remoteControl{}

func (c remoteControl) Stop(ctx context.Context, comp clusters.Component) error {
	return c.call(ctx, "stop", comp)
}

func (c remoteControl) Kill(ctx context.Context, comp clusters.Component) error {
	return c.call(ctx, "kill", comp)
}

func (c remoteControl) Start(ctx context.Context, comp clusters.Component) error {
	return c.call(ctx, "start", comp)
}

func (c remoteControl) Restart(ctx context.Context, comp clusters.Component) error {
	return c.call(ctx, "restart", comp)
}

func (c remoteControl) call(ctx context.Context, op string, comp clusters.Component) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return fmt.Errorf("%s %s: the cluster's holder does not answer: %w", op, comp, err)
	}
	defer conn.Close()
	// The reply can take as long as a component's start; ctx bounds it.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := json.NewEncoder(conn).Encode(controlRequest{Op: op, Component: comp}); err != nil {
		return fmt.Errorf("%s %s: %w", op, comp, err)
	}
	var rep controlReply
	if err := json.NewDecoder(conn).Decode(&rep); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", op, comp, ctx.Err())
		}
		return fmt.Errorf("%s %s: no reply from the cluster's holder: %w", op, comp, err)
	}
	if rep.Error != "" {
		return errors.New(rep.Error)
	}
	return nil
}
