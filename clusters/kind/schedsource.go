package kind

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind/schedimage"
)

// schedulerSource is where the scheduler under test comes from: an image in the container engine
// (Spec.Images.Scheduler) or a binary wrapped into an image here (Spec.SchedulerBinary). The two
// differ only in how the image archive is had; loading it into the control-plane node and swapping
// the static pod are the same (creation.scheduler).
type schedulerSource struct {
	// Image is the reference the scheduler's static pod runs.
	Image string
	// Engine is the container engine the image is saved from, when it comes from one.
	Engine string
	// Binary is set when the image is built from a binary.
	Binary *schedimage.Binary
}

func (s *schedulerSource) String() string {
	if s.Binary != nil {
		return fmt.Sprintf("scheduler image %s (built from %s)", s.Image, s.Binary.Path)
	}
	return "scheduler image " + s.Image
}

// image and binary are what the cluster state records of the source ("" when there is none).
func (s *schedulerSource) image() string {
	if s == nil {
		return ""
	}
	return s.Image
}

func (s *schedulerSource) binary() string {
	if s == nil || s.Binary == nil {
		return ""
	}
	return s.Binary.Path
}

// resolveScheduler checks, before anything is created, that the scheduler under test can be had: an
// image must be in the engine (it is saved from there), a binary must be a static Kubernetes
// component. nil means the node image's own scheduler runs.
func (p *Provider) resolveScheduler(ctx context.Context, spec clusters.Spec, engine string) (*schedulerSource, error) {
	switch {
	case spec.Images.Scheduler != "":
		img := spec.Images.Scheduler
		if err := p.opts.Runner(ctx, io.Discard, engine, "image", "inspect", img); err != nil {
			return nil, fmt.Errorf("scheduler image %s is not in %s (build or pull it there first): %w", img, engine, err)
		}
		return &schedulerSource{Image: img, Engine: engine}, nil
	case spec.SchedulerBinary != "":
		b, err := schedimage.Inspect(ctx, spec.SchedulerBinary)
		if err != nil {
			return nil, err
		}
		return &schedulerSource{Image: b.Ref, Binary: b}, nil
	}
	return nil, nil
}

// writeArchive writes a docker-archive tar of the source's image to w: `<engine> save` writes one,
// and so does schedimage. ctr imports either.
func (s *schedulerSource) writeArchive(ctx context.Context, run Runner, w io.Writer) error {
	if s.Binary != nil {
		_, err := s.Binary.WriteArchive(w)
		return err
	}
	if err := run(ctx, w, s.Engine, "save", s.Image); err != nil {
		return fmt.Errorf("save from %s: %w", s.Engine, err)
	}
	return nil
}

// version is the scheduler's version as recorded: what the running container reports
// (schedulerVersion), or for a built image, when the container could not be asked, what the binary
// reported before it was wrapped.
func (s *schedulerSource) version(reported string) string {
	if s.Binary != nil && strings.HasPrefix(reported, imageTagVersionPrefix) {
		return s.Binary.Version
	}
	return reported
}
