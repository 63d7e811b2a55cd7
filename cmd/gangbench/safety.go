package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/gangbench/gangbench/clusters/providers"
)

// safetyFlags registers the two answers a user gives before gangbench touches a cluster it did not
// create (see providers.CheckSafe). Commands that take --kubeconfig register them next to it.
func safetyFlags(fs *pflag.FlagSet, o *providers.SafetyOptions) {
	fs.BoolVar(&o.AllowExisting, providers.AllowExistingFlag, false,
		"allow --kubeconfig to name a cluster gangbench did not create; gangbench then creates namespaces, PriorityClasses and nodes labelled "+
			providers.ManagedLabel+" in it, and deletes only what carries that label")
	fs.BoolVar(&o.Force, providers.ForceFlag, false,
		"run even against a cluster that looks like production (a context, cluster or server name with the word prod, production, prd or live, "+
			"or a server that is not on this machine or a private network)")
}

// checkKubeconfig refuses a --kubeconfig the user has not allowed (providers.CheckSafe, which
// knows the harness's own state dirs) before anything is created in it. A refusal is a usage
// error (exit 2): the fix is a flag.
func checkKubeconfig(kubeconfig string, o providers.SafetyOptions) error {
	err := providers.CheckSafe(kubeconfig, o)
	var refused *providers.RefusedError
	if errors.As(err, &refused) {
		return usageError{err}
	}
	return err
}
