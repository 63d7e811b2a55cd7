package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/gangbench/gangbench/clusters/existing"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/local"
)

// safetyFlags registers the two answers a user gives before gangbench touches a cluster it did not
// create (see existing.CheckSafe). Commands that take --kubeconfig register them next to it.
func safetyFlags(fs *pflag.FlagSet, o *existing.SafetyOptions) {
	fs.BoolVar(&o.AllowExisting, existing.AllowExistingFlag, false,
		"allow --kubeconfig to name a cluster gangbench did not create; gangbench then creates namespaces, PriorityClasses and nodes labelled "+
			existing.ManagedLabel+" in it, and deletes only what carries that label")
	fs.BoolVar(&o.Force, existing.ForceFlag, false,
		"run even against a cluster that looks like production (a context, cluster or server name with the word prod, production, prd or live, "+
			"or a server that is not on this machine or a private network)")
}

// checkKubeconfig refuses a --kubeconfig the user has not allowed (existing.CheckSafe) before
// anything is created in it. The kubeconfig's current context is the one judged, as it is the one
// the run uses. A refusal is a usage error (exit 2): the fix is a flag.
func checkKubeconfig(kubeconfig string, o existing.SafetyOptions) error {
	o.OwnStateDirs = nil
	// A provider whose state dir cannot be found (no home directory) owns no kubeconfig: leaving it
	// out only makes the check stricter, so it is not an error here.
	for _, dir := range []func() (string, error){local.DefaultStateDir, kind.DefaultStateDir} {
		if d, err := dir(); err == nil {
			o.OwnStateDirs = append(o.OwnStateDirs, d)
		}
	}
	err := existing.CheckSafe(kubeconfig, "", o)
	var refused *existing.RefusedError
	if errors.As(err, &refused) {
		return usageError{err}
	}
	return err
}
