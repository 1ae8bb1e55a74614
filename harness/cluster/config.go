package cluster

import (
	"bytes"
	"fmt"
	"text/template"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// serverConfig is what the server's development.yaml is rendered from.
type serverConfig struct {
	Postgres          string // host:port
	User, Password    string
	NumHistoryShards  int
	LogLevel          string
	DynamicConfigPath string
	Frontend          servicePorts
	History           servicePorts
	Matching          servicePorts
	Worker            servicePorts
	FrontendHTTPPort  int
}

type servicePorts struct {
	GRPC, Membership int
}

// serverConfigTemplate follows config/development-postgres12.yaml of the
// server module, with every port free, every address loopback, archival off
// and no metrics or pprof listener.
var serverConfigTemplate = template.Must(template.New("development.yaml").Parse(`# Written by harness/cluster for one test run.
log:
  stdout: true
  level: {{.LogLevel}}

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: {{.NumHistoryShards}}
  datastores:
    postgres-default:
      sql:
        pluginName: "postgres12"
        databaseName: "temporal"
        connectAddr: "{{.Postgres}}"
        connectProtocol: "tcp"
        user: "{{.User}}"
        password: "{{.Password}}"
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: "1h"
    postgres-visibility:
      sql:
        pluginName: "postgres12"
        databaseName: "temporal_visibility"
        connectAddr: "{{.Postgres}}"
        connectProtocol: "tcp"
        user: "{{.User}}"
        password: "{{.Password}}"
        maxConns: 4
        maxIdleConns: 4
        maxConnLifetime: "1h"

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
  pprof:
    port: 0

services:
  frontend:
    rpc:
      grpcPort: {{.Frontend.GRPC}}
      membershipPort: {{.Frontend.Membership}}
      bindOnIP: "127.0.0.1"
      httpPort: {{.FrontendHTTPPort}}
  history:
    rpc:
      grpcPort: {{.History.GRPC}}
      membershipPort: {{.History.Membership}}
      bindOnIP: "127.0.0.1"
  matching:
    rpc:
      grpcPort: {{.Matching.GRPC}}
      membershipPort: {{.Matching.Membership}}
      bindOnIP: "127.0.0.1"
  worker:
    rpc:
      grpcPort: {{.Worker.GRPC}}
      membershipPort: {{.Worker.Membership}}
      bindOnIP: "127.0.0.1"

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcAddress: "127.0.0.1:{{.Frontend.GRPC}}"
      httpAddress: "127.0.0.1:{{.FrontendHTTPPort}}"

dcRedirectionPolicy:
  policy: "noop"

archival:
  history:
    state: "disabled"
  visibility:
    state: "disabled"

namespaceDefaults:
  archival:
    history:
      state: "disabled"
    visibility:
      state: "disabled"

dynamicConfigClient:
  filepath: "{{.DynamicConfigPath}}"
  pollInterval: "10s"
`))

// dynamicConfig is the server's dynamic configuration: the development-sql
// defaults that matter to this repository's tests.
const dynamicConfig = `# Written by harness/cluster for one test run.
limit.maxIDLength:
  - value: 255
    constraints: {}
frontend.enableExecuteMultiOperation:
  - value: true
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
    constraints: {}
`

// OnePartitionPerQueue is dynamic configuration that gives every task
// queue one partition (the default is 4): the queue rate limit that a
// governor sets (the worker's shared rate) is then spread evenly over time
// instead of split into four quarters, one per partition, which dispatch
// only while their own partition has a backlog (the tail of a herd then
// went at a fraction of the limit) and in bursts of one task per
// partition. Server 1.29.1 matches a taskType constraint only beside a
// taskQueueName (its precedence: namespace+name+type, namespace+name,
// name, namespace, global), so this test cluster sets it globally; an
// operator sets it for the origin queues only, with a taskQueueName
// constraint per queue.
const OnePartitionPerQueue = `matching.numTaskqueueReadPartitions:
  - value: 1
    constraints: {}
matching.numTaskqueueWritePartitions:
  - value: 1
    constraints: {}
`

func renderServerConfig(c serverConfig) ([]byte, error) {
	var b bytes.Buffer
	if err := serverConfigTemplate.Execute(&b, c); err != nil {
		return nil, fmt.Errorf("cluster: render server config: %w", err)
	}
	return b.Bytes(), nil
}

// Ports that freePorts picks from. Temporal's SQL schema stores membership
// ports as smallint, so they must stay below 32768, which also keeps them out
// of Linux's default ephemeral range (32768-60999) that the kernel hands out
// for outgoing connections and port 0.
const (
	minPort = 15000
	maxPort = 32767
)

// freePorts returns n distinct TCP ports in [15000, 32767] that were free on
// 127.0.0.1 a moment ago ([itest.FreePortsIn]).
func freePorts(n int) ([]int, error) { return itest.FreePortsIn(minPort, maxPort, n) }
