package plugin

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// waitTimeout bounds every wait in these tests. Generous, because the machine running them may be
// busy; a passing test never waits it out.
const waitTimeout = 20 * time.Second

// fakeKubelet is the kubelet's side of the device plugin protocol: it serves the real
// RegistrationServer on dir/kubelet.sock, records every RegisterRequest, and, like the kubelet's
// device manager, then dials the registered endpoint in the same directory, asks for the options and
// follows ListAndWatch, forwarding every list.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer

	t    *testing.T
	dir  string
	sock string
	srv  *grpc.Server

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once

	regs  chan *pluginapi.RegisterRequest
	opts  chan *pluginapi.DevicePluginOptions
	lists chan *pluginapi.ListAndWatchResponse
	// streamEnd receives the error that ended a ListAndWatch stream (io.EOF when the plugin ended it).
	streamEnd chan error
}

func startFakeKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	k := &fakeKubelet{
		t:         t,
		dir:       dir,
		sock:      filepath.Join(dir, "kubelet.sock"),
		ctx:       ctx,
		cancel:    cancel,
		regs:      make(chan *pluginapi.RegisterRequest, 16),
		opts:      make(chan *pluginapi.DevicePluginOptions, 16),
		lists:     make(chan *pluginapi.ListAndWatchResponse, 64),
		streamEnd: make(chan error, 16),
	}
	ln, err := net.Listen("unix", k.sock)
	if err != nil {
		t.Fatalf("fake kubelet: %v", err)
	}
	// WaitForHandlers: stop must not wg.Wait while a Register handler may still call wg.Go.
	k.srv = grpc.NewServer(grpc.WaitForHandlers(true))
	pluginapi.RegisterRegistrationServer(k.srv, k)
	k.wg.Go(func() { _ = k.srv.Serve(ln) })
	t.Cleanup(k.stop)
	return k
}

// stop shuts the fake kubelet down and removes its socket, as a dying kubelet leaves it gone.
// Idempotent.
func (k *fakeKubelet) stop() {
	// Once: removing the path again later would delete a successor kubelet's socket.
	k.stopOnce.Do(func() {
		k.cancel()
		k.srv.Stop()
		k.wg.Wait()
		_ = os.Remove(k.sock)
	})
}

// Register checks the request as the kubelet does and then connects to the plugin asynchronously,
// as the kubelet does: the plugin must already be serving when it registers.
func (k *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.GetVersion() != pluginapi.Version {
		return nil, fmt.Errorf("unsupported version %q", req.GetVersion())
	}
	select {
	case k.regs <- proto.Clone(req).(*pluginapi.RegisterRequest):
	default:
		k.t.Errorf("fake kubelet: too many registrations")
	}
	k.wg.Go(func() { k.follow(req.GetEndpoint()) })
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) follow(endpoint string) {
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		k.streamEnd <- err
		return
	}
	defer func() { _ = conn.Close() }()
	c := pluginapi.NewDevicePluginClient(conn)
	o, err := c.GetDevicePluginOptions(k.ctx, &pluginapi.Empty{})
	if err != nil {
		k.streamEnd <- fmt.Errorf("GetDevicePluginOptions: %w", err)
		return
	}
	k.opts <- o
	stream, err := c.ListAndWatch(k.ctx, &pluginapi.Empty{})
	if err != nil {
		k.streamEnd <- fmt.Errorf("ListAndWatch: %w", err)
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			k.streamEnd <- err
			return
		}
		select {
		case k.lists <- resp:
		case <-k.ctx.Done():
			return
		}
	}
}

// recv waits (bounded) for the next value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		var zero T
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		return zero
	}
}

// runningPlugin is a Plugin whose Run is going in the background.
type runningPlugin struct {
	*Plugin
	cancel context.CancelFunc
	errc   chan error
}

// stop cancels Run and returns its result. Idempotent.
func (r *runningPlugin) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.errc:
		if !ok {
			return nil
		}
		close(r.errc)
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("Run did not return within %s of cancel", waitTimeout)
		return nil
	}
}

func startPlugin(t *testing.T, opts Options, tweak ...func(*Plugin)) *runningPlugin {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, f := range tweak {
		f(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningPlugin{Plugin: p, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- p.Run(ctx) }()
	select {
	case <-p.Ready():
	case err := <-r.errc:
		cancel()
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(waitTimeout):
		cancel()
		t.Fatalf("plugin not ready within %s", waitTimeout)
	}
	t.Cleanup(func() {
		if err := r.stop(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

// dialPlugin is a client to the plugin socket, for calls the fake kubelet does not make.
func dialPlugin(t *testing.T, p *Plugin) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+p.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}
