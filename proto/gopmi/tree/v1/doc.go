// Package treev1 is the generated Go code of gopmi.tree.v1 (tree.proto):
// the private service the nodes of a job's fence tree serve each other
// besides the contract. Only the fence tree's hosts use it.
package treev1
