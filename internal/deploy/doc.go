// Package deploy holds no code: its tests check the deployment files
// with the tools that read them. compose.yaml with docker compose config
// (docker-compose where the compose plugin is missing), the systemd unit
// with systemd-analyze verify, the Dockerfile with dockerfile-utils (npm;
// the test machines have no Docker daemon to build it), the Grafana
// dashboard's queries with promtool, make demo's recipe with make -n, and
// the example configs with the config loader serve uses, which must also
// explain every config field.
package deploy
