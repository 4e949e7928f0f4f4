//go:build !linux

package main

// runIfReplica: TestShardedWebsites runs its replicas as processes that
// die with the test (PR_SET_PDEATHSIG), on Linux only.
func runIfReplica() (int, bool) { return 0, false }
