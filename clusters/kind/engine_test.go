package kind

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestDetectEngineNoneAnswers(t *testing.T) {
	r := runnerWhere(nil, nil)
	_, err := DetectEngineWith(context.Background(), "", r.run)
	if err == nil {
		t.Fatal("detected an engine where none answers")
	}
	want := "no container engine answers: " +
		"docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?; " +
		"podman: not installed; nerdctl: not installed. The kind provider needs one; use --provider local"
	if err.Error() != want {
		t.Errorf("error:\n got %q\nwant %q", err, want)
	}
	if !errors.Is(err, ErrNoEngine) {
		t.Error("errors.Is(err, ErrNoEngine) is false")
	}
	var ne *NoEngineError
	if !errors.As(err, &ne) || len(ne.Tried) != 3 {
		t.Errorf("want a NoEngineError naming 3 engines, got %#v", err)
	}
}

func TestDetectEngineFirstAnswering(t *testing.T) {
	tests := []struct {
		answering []string
		preferred string
		want      string
	}{
		{[]string{"docker"}, "", "docker"},
		{[]string{"podman"}, "", "podman"},
		{[]string{"nerdctl", "podman"}, "", "podman"},
		{[]string{"docker", "podman"}, "podman", "podman"},
	}
	for _, tt := range tests {
		r := runnerWhere(tt.answering, nil)
		got, err := DetectEngineWith(context.Background(), tt.preferred, r.run)
		if err != nil || got != tt.want {
			t.Errorf("answering %v, preferred %q: got %q, %v; want %q", tt.answering, tt.preferred, got, err, tt.want)
		}
	}
}

func TestDetectEnginePreferredOnly(t *testing.T) {
	r := runnerWhere([]string{"docker"}, nil)
	_, err := DetectEngineWith(context.Background(), "podman", r.run)
	want := "container engine podman does not answer: podman: not installed. The kind provider needs one; use --provider local"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	for _, c := range r.calls {
		if strings.HasPrefix(c, "docker") {
			t.Errorf("asked docker although podman was preferred: %q", c)
		}
	}
	if _, err := DetectEngineWith(context.Background(), "lxc", r.run); err == nil || !strings.Contains(err.Error(), `"lxc"`) {
		t.Errorf("unknown engine: %v", err)
	}
}

func TestDetectEngineHangingDaemon(t *testing.T) {
	hang := func(ctx context.Context, _ io.Writer, name string, args ...string) error {
		<-ctx.Done()
		return &CommandError{Args: append([]string{name}, args...), Err: ctx.Err()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := DetectEngineWith(ctx, "docker", hang)
	if err == nil || !strings.Contains(err.Error(), "docker: did not answer within") {
		t.Errorf("got %v, want a did-not-answer error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestDetectEngineHere runs the real probe on this machine: it must answer within the probe
// timeout either way, and when nothing answers the error must name all three engines.
func TestDetectEngineHere(t *testing.T) {
	start := time.Now()
	engine, err := DetectEngine(context.Background(), "")
	if d := time.Since(start); d > engineProbeTimeout+5*time.Second {
		t.Errorf("detection took %s", d)
	}
	if err == nil {
		t.Logf("engine %s answers", engine)
		return
	}
	for _, e := range Engines() {
		if !strings.Contains(err.Error(), e+": ") {
			t.Errorf("error does not name %s: %v", e, err)
		}
	}
	t.Logf("no engine: %v", err)
}
