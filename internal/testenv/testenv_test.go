package testenv

import "testing"

func TestLong(t *testing.T) {
	t.Setenv(LongEnv, "")
	if Long() {
		t.Error("Long with the variable empty")
	}
	t.Setenv(LongEnv, "1")
	if !Long() {
		t.Error("not Long with the variable set to 1")
	}
	ran := false
	t.Run("runs in the long tier", func(t *testing.T) {
		SkipUnlessLong(t, "covered elsewhere")
		ran = true
	})
	if !ran {
		t.Error("SkipUnlessLong skipped in the long tier")
	}
	t.Setenv(LongEnv, "0")
	skipped := t.Run("skips outside it", func(t *testing.T) {
		SkipUnlessLong(t, "covered elsewhere")
		t.Error("not skipped outside the long tier")
	})
	if !skipped {
		t.Error("the subtest failed")
	}
}
