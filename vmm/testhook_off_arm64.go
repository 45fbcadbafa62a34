//go:build linux && arm64 && !mvmtesthooks

package vmm

// afterSandboxHook is a no-op in mvm's own builds; the integration tests'
// build (tag mvmtesthooks) makes a vCPU thread try a forbidden call here.
func (m *VM) afterSandboxHook() error { return nil }
