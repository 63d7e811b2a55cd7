package nodeimage

import (
	"strings"
	"testing"
)

func TestMirrorInDeb822(t *testing.T) {
	const debian = `Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`
	for _, tc := range []struct {
		name, text, suite, want string
	}{
		{"first stanza", debian, "bookworm", "http://deb.debian.org/debian"},
		{"updates suite in a list", debian, "bookworm-updates", "http://deb.debian.org/debian"},
		{"security stanza", debian, "bookworm-security", "http://security.debian.org/debian-security"},
		{"suite absent", debian, "trixie", ""},
		{"bookworm-security does not match bookworm", `Types: deb
URIs: http://security.debian.org/debian-security
Suites: bookworm-security
Components: main
`, "bookworm", ""},
		{"later stanza", `Types: deb
URIs: http://archive.ubuntu.com/ubuntu
Suites: noble
Components: main

Types: deb
URIs: http://mirror.example/debian http://second.example/debian
Suites: trixie
Components: main contrib
`, "trixie", "http://mirror.example/debian"},
		{"deb-src only", `Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
`, "bookworm", ""},
		{"both types", `Types: deb-src deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
`, "bookworm", "http://deb.debian.org/debian"},
		{"no main component", `Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: contrib non-free
`, "bookworm", ""},
		{"main among components", `Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: contrib main non-free-firmware
`, "bookworm", "http://deb.debian.org/debian"},
		{"commented keys are ignored", `Types: deb
# URIs: http://commented.example/debian
#URIs: http://commented2.example/debian
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
`, "bookworm", "http://deb.debian.org/debian"},
		{"commented URI only", `Types: deb
#URIs: http://commented.example/debian
Suites: bookworm
Components: main
`, "bookworm", ""},
		{"empty", "", "bookworm", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mirrorIn(tc.text, tc.suite, true); got != tc.want {
				t.Errorf("mirrorIn(deb822, %q) = %q, want %q\n%s", tc.suite, got, tc.want, tc.text)
			}
		})
	}
}

func TestMirrorInSourcesList(t *testing.T) {
	for _, tc := range []struct {
		name, text, suite, want string
	}{
		{"plain", "deb http://deb.debian.org/debian bookworm main\n", "bookworm", "http://deb.debian.org/debian"},
		{"one option", "deb [arch=amd64] http://mirror.example/debian bookworm main contrib\n", "bookworm", "http://mirror.example/debian"},
		{"several options", "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.example/debian bookworm contrib main\n", "bookworm", "http://mirror.example/debian"},
		{"spaced brackets", "deb [ arch=amd64 ] http://mirror.example/debian bookworm main\n", "bookworm", "http://mirror.example/debian"},
		{"security line does not match", "deb http://security.debian.org/debian-security bookworm-security main\n", "bookworm", ""},
		{"skips other lines", `# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb http://deb.debian.org/debian bookworm contrib
deb http://deb.debian.org/debian bookworm main
`, "bookworm", "http://deb.debian.org/debian"},
		{"no main", "deb http://deb.debian.org/debian bookworm contrib non-free\n", "bookworm", ""},
		{"main as a prefix only", "deb http://deb.debian.org/debian bookworm mainline\n", "bookworm", ""},
		{"too short", "deb http://deb.debian.org/debian\n", "bookworm", ""},
		{"unclosed options", "deb [arch=amd64 http://deb.debian.org/debian bookworm\n", "bookworm", ""},
		{"absent", "deb http://deb.debian.org/debian trixie main\n", "bookworm", ""},
		{"empty", "", "bookworm", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mirrorIn(tc.text, tc.suite, false); got != tc.want {
				t.Errorf("mirrorIn(sources.list, %q) = %q, want %q\n%s", tc.suite, got, tc.want, tc.text)
			}
		})
	}
}

// A deb822 file read as a one-line file (or the reverse) finds nothing: the format flag matters.
func TestMirrorInFormatFlag(t *testing.T) {
	list := "deb http://deb.debian.org/debian bookworm main\n"
	deb822 := "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n"
	if got := mirrorIn(list, "bookworm", true); got != "" {
		t.Errorf("one-line text parsed as deb822 = %q, want \"\"", got)
	}
	if got := mirrorIn(deb822, "bookworm", false); got != "" {
		t.Errorf("deb822 text parsed as one-line = %q, want \"\"", got)
	}
}

func TestRootfsKey(t *testing.T) {
	bookworm, trixie := rootfsKey("bookworm"), rootfsKey("trixie")
	if bookworm == trixie {
		t.Fatalf("rootfsKey is %q for both bookworm and trixie", bookworm)
	}
	if bookworm != rootfsKey("bookworm") {
		t.Errorf("rootfsKey(bookworm) not stable: %q, %q", bookworm, rootfsKey("bookworm"))
	}
	for suite, k := range map[string]string{"bookworm": bookworm, "trixie": trixie} {
		hash, ok := strings.CutPrefix(k, suite+"-")
		if !ok || len(hash) != 12 || strings.Trim(hash, "0123456789abcdef") != "" {
			t.Errorf("rootfsKey(%s) = %q, want %s-<12 hex>", suite, k, suite)
		}
	}
}

// The key also covers the package list, so a changed list rebuilds the root filesystem.
func TestRootfsKeyCoversPackages(t *testing.T) {
	before := rootfsKey(DefaultSuite)
	saved := rootfsPackages
	t.Cleanup(func() { rootfsPackages = saved })
	rootfsPackages = append(append([]string(nil), saved...), "vim")
	if after := rootfsKey(DefaultSuite); after == before {
		t.Errorf("rootfsKey unchanged (%q) after adding a package", after)
	}
}

// Stanzas separated by a whitespace-only line or written with CRLF stay apart, and a disabled one
// is not used.
func TestMirrorInDeb822Separators(t *testing.T) {
	for name, text := range map[string]string{
		"whitespace line": "Types: deb\nURIs: http://a.example/debian\nSuites: trixie\nComponents: main\n \t\nTypes: deb\nURIs: http://b.example/debian\nSuites: bookworm\nComponents: main\n",
		"crlf":            "Types: deb\r\nURIs: http://a.example/debian\r\nSuites: trixie\r\nComponents: main\r\n\r\nTypes: deb\r\nURIs: http://b.example/debian\r\nSuites: bookworm\r\nComponents: main\r\n",
		"disabled first":  "Enabled: no\nTypes: deb\nURIs: http://a.example/debian\nSuites: bookworm\nComponents: main\n\nTypes: deb\nURIs: http://b.example/debian\nSuites: bookworm\nComponents: main\n",
	} {
		if got := mirrorIn(text, "bookworm", true); got != "http://b.example/debian" {
			t.Errorf("%s: mirrorIn = %q, want http://b.example/debian", name, got)
		}
	}
}
