// Package layers holds no code: its test is the layering of the module
// (DESIGN.md section 12), checked on the real import graph.
//
// From the bottom up:
//
//   - foundations, pure: sqlcheck, bound, signing, marque, acts (the signed
//     human acts), quota, route, memo, lookalike (what marks look-alike
//     characters wherever a human reads agent text; it imports nothing of
//     the module);
//   - the target side: pilot and pilot/... hold the only target
//     credentials and reach nothing of the control plane's state: not the
//     store, the logbook, the switches, the audit, the Surveyor or the
//     gateway, so a Pilot verifies everything from what it is handed;
//   - the control plane's state: store (no domain package below it),
//     logbook, switches, audit;
//   - the models: llm, surveyor (they see only what they are handed: no
//     store, no Pilot, no gateway), and cover (CoVer's drafts, gates and
//     measures: the catalog, read-only sample rows and the models it is
//     handed; no store, Pilot, gateway, logbook or Surveyor);
//   - the statement path: gateway;
//   - beside it, with no authority: leadsman (the advisory notes; it links
//     nothing that approves, denies, executes, audits or routes, and only
//     the fronts and the wiring import it, so nothing on those paths reads
//     what its model wrote) and backtest (a grantor's replay of the
//     logbook through an unsigned delegation; it executes nothing);
//   - the fronts: httpapi, mcpserver, pgwire;
//   - the wiring: node (node.Start, one control-plane node) and cli (the
//     commands), imported by cmd/harbormaster only.
//
// The route is a pure function: it imports sqlcheck and the standard
// library only.
//
// Callers of a Pilot hold the role they use (pilot's executor.go): the
// ledger names the settling role alone, and the fronts name none (they
// reach a target through the gateway, which hands them its catalog)
// (TestPilotRoles).
package layers
