package enginecli

import (
	"errors"
	"testing"
)

func TestCommandError(t *testing.T) {
	cause := errors.New("exit status 1")
	tests := []struct {
		name string
		err  *CommandError
		want string
	}{
		{"with stderr", &CommandError{Args: []string{"docker", "info"}, Stderr: "  Cannot connect\n", Err: cause},
			"docker info: exit status 1: Cannot connect"},
		{"blank stderr", &CommandError{Args: []string{"podman", "save", "x"}, Stderr: " \n", Err: cause},
			"podman save x: exit status 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, cause) {
				t.Errorf("errors.Is(%v, cause) = false, want true", tt.err)
			}
		})
	}
}
