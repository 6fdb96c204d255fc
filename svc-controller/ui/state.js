// @ts-check
/**
 * The dashboard's one mutable state, shared by its modules: what the service last said
 * (Environment, session, cluster), the view on screen, the dashboard's filters, and the
 * timers of the live updates. Every other module keeps only constants at its top level.
 *
 * Also the shapes of the service's answers the UI reads (see docs/api.md).
 */

/**
 * A log of a job as the Environment lists it.
 * @typedef {object} LogRef
 * @property {number} counter
 * @property {string} status
 */

/**
 * A Job or a JobHttp as the Environment lists it (the fields the UI reads).
 * @typedef {object} Job
 * @property {string} id
 * @property {string} name
 * @property {string} [status] started, success, fail, paused; empty before the first run
 * @property {string} [description] operator-written HTML
 * @property {string} [schedule]
 * @property {string} [timezone]
 * @property {number} [interval] nanoseconds
 * @property {string} [next_run]
 * @property {string} [last_run]
 * @property {LogRef[]} [logs]
 * @property {number} [log_retention]
 * @property {string} [path] a Job's trigger path
 * @property {string} [auth_kind]
 * @property {string} [header_sign]
 * @property {number} [timeout] nanoseconds
 * @property {string[]} [commands]
 * @property {string} [http_method]
 * @property {string} [http_url]
 * @property {string} [http_request_type]
 * @property {string[]} [http_headers]
 * @property {number} [http_timeout] nanoseconds
 * @property {boolean} [http_insecure]
 */

/**
 * GET /svc/api/environment's data.
 * @typedef {object} Env
 * @property {string} [name]
 * @property {string} [version]
 * @property {boolean} [is_development]
 * @property {Record<string, Job>} [jobs]
 * @property {Record<string, Job>} [http_jobs]
 */

/**
 * GET /svc/api/session's data.
 * @typedef {object} Session
 * @property {boolean} login true when the service has users
 * @property {string} [name] empty without a session
 * @property {string} [role] viewer, operator or admin
 * @property {string} [csrf] the token of X-Svc-Csrf
 */

/**
 * @typedef {object} ClusterNode
 * @property {string} name
 * @property {boolean} live
 * @property {string} heartbeat
 * @property {string} started
 * @property {number} max_job_running
 */

/**
 * A job whose definitions differ between live nodes; `here` is this node's hash.
 * @typedef {object} Differ
 * @property {string} kind job or job_http
 * @property {string} id
 * @property {string} [here]
 * @property {{hash: string, nodes?: string[]}[]} [definitions]
 */

/**
 * A job other live nodes define and this one does not.
 * @typedef {object} Missing
 * @property {string} kind
 * @property {string} id
 * @property {string[]} [nodes]
 */

/**
 * GET /svc/api/cluster's data.
 * @typedef {object} Cluster
 * @property {boolean} enabled
 * @property {string} [node] this node's name
 * @property {ClusterNode[]} [nodes]
 * @property {Differ[]} [differ]
 * @property {number} [differ_total]
 * @property {Missing[]} [missing_here]
 * @property {number} [missing_here_total]
 */

/**
 * Where the URL fragment leads: #/, #/audit, #/job/<id>[/log/<n>], #/http/<id>[/log/<n>].
 * @typedef {object} Route
 * @property {string} key "dashboard", "audit" or "<kind>:<id>"
 * @property {Kind} [kind]
 * @property {string} [id]
 * @property {number} [counter] the log shown, 0 for none
 * @property {boolean} [scroll] the log is asked for again on the same page
 */

/** @typedef {"job" | "http"} Kind the dashboard's kinds: Job and JobHttp */

/**
 * The view on screen: `update` renders what changed in the state, `route` follows a new
 * fragment of the same page, `onEvent` sees each live event.
 * @typedef {object} View
 * @property {string} key
 * @property {() => void} update
 * @property {(route: Route) => void} route
 * @property {() => void} destroy
 * @property {(name: string, data: any) => void} [onEvent]
 */

export const state = {
  /** @type {Env | null} the Environment; null until it answers */
  env: null,
  /** @type {View | null} */
  view: null,
  /** @type {Session | null} null until GET /svc/api/session answers */
  session: null,
  /** The dashboard's filters, kept across views. */
  filters: { text: "", status: "" },
  /** @type {Cluster | null} null until GET /svc/api/cluster answers */
  cluster: null,
  /** Why the cluster cannot be read (the last answer is kept and shown with it). */
  clusterError: "",
  /**
   * "<kind>/<id>" of each job whose definition here differs from another live node's:
   * its entry of cluster.differ, looked up once per job and render.
   * @type {Record<string, Differ>}
   */
  driftIndex: {},
  /** True while the event stream is open and has said `ready`. */
  live: false,
  /** @type {number | undefined} the next fetch of the Environment */
  pollTimer: undefined,
  /** @type {number | undefined} the fetch a burst of events asked for */
  refreshSoon: undefined,
  /** When an event last made the page fetch the Environment (ms since the epoch). */
  lastEventRefresh: 0,
  /** True once the page is on its way to another (the login page). */
  leaving: false,
};
