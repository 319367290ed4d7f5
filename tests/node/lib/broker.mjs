// Drives one `laminar broker` through the Rust harness's line protocol (laminar-test-broker, see
// tests/src/bin/laminar-test-broker.rs), so the Node suite starts, kills and restarts brokers
// exactly as the Rust and Python suites do.

import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const LINE_TIMEOUT_MS = 60_000

export function controllerBinary() {
  if (process.env.LAMINAR_TEST_BROKER) return process.env.LAMINAR_TEST_BROKER
  let target = process.env.CARGO_TARGET_DIR || path.join(REPO_ROOT, 'target')
  if (!path.isAbsolute(target)) target = path.join(REPO_ROOT, target)
  return path.join(target, 'debug', 'laminar-test-broker')
}

/** Runs `body` with a broker of its own, stopped however `body` ends. */
export async function withBroker(body) {
  const broker = await BrokerProcess.start()
  try { return await body(broker) } finally { await broker.stop() }
}

export class BrokerProcess {
  /**
   * Starts a broker and resolves once it answers ApiVersions. `cluster: N` starts N brokers in
   * combined mode forming one quorum: `bootstrap` then lists them all, and only stop() applies.
   * `listeners`: names of listeners besides the PLAINTEXT one (SASL_SSL, say), each on a port of
   * its own; `this.listeners` maps each name to host:port.
   */
  static async start({ overrides = {}, cores = 2, cluster = 0, listeners = [] } = {}) {
    const binary = controllerBinary()
    if (!existsSync(binary)) {
      throw new Error(`${binary} not found: build it with \`cargo build -p laminar-tests --bins\` ` +
        '(and the broker with `cargo build`), or set LAMINAR_TEST_BROKER')
    }
    const args = ['--cores', String(cores)]
    for (const [key, value] of Object.entries(overrides)) args.push('--override', `${key}=${value}`)
    for (const name of listeners) args.push('--listener', name)
    if (cluster) args.push('--cluster', String(cluster))
    const broker = new BrokerProcess(spawn(binary, args, { stdio: ['pipe', 'pipe', 'inherit'] }))
    broker.#expectReady(await broker.#nextLine())
    broker.listeners = {}
    if (listeners.length) {
      for (const item of (await broker.#command('listeners')).split(' ').slice(1)) {
        const [name, address] = item.split('=')
        broker.listeners[name] = address
      }
    }
    return broker
  }

  #child
  #lines = []
  #waiters = []
  #exited = false

  constructor(child) {
    this.#child = child
    createInterface({ input: child.stdout }).on('line', line => {
      const waiter = this.#waiters.shift()
      if (waiter) waiter.resolve(line)
      else this.#lines.push(line)
    })
    child.on('exit', code => {
      this.#exited = true
      for (const waiter of this.#waiters.splice(0)) {
        waiter.reject(new Error(`laminar-test-broker exited (${code})`))
      }
    })
  }

  #nextLine() {
    if (this.#lines.length) return Promise.resolve(this.#lines.shift())
    if (this.#exited) return Promise.reject(new Error('laminar-test-broker has exited'))
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer within ${LINE_TIMEOUT_MS} ms`)), LINE_TIMEOUT_MS)
      this.#waiters.push({
        resolve: line => { clearTimeout(timer); resolve(line) },
        reject: err => { clearTimeout(timer); reject(err) },
      })
    })
  }

  #expectReady(line) {
    if (!line.startsWith('ready ')) throw new Error(line)
    const [, bootstrap, dataDir] = line.split(' ')
    this.bootstrap = bootstrap
    this.dataDir = dataDir
  }

  async #command(command) {
    this.#child.stdin.write(`${command}\n`)
    const line = await this.#nextLine()
    if (line.startsWith('error ')) throw new Error(`${command}: ${line.slice(6)}`)
    return line
  }

  async kill9() { await this.#command('kill9') }

  async terminate() { return Number((await this.#command('terminate')).split('exit=')[1]) }

  async restart() { this.#expectReady(await this.#command('restart')) }

  /** EOF on stdin: the controller kills the broker and exits. */
  async stop() {
    if (this.#exited) return
    const exited = new Promise(resolve => this.#child.once('exit', resolve))
    this.#child.stdin.end()
    await exited
  }
}
