// kafkajs over TLS and SASL: a broker with an SSL listener that requires client certificates
// and a SASL_SSL one with SCRAM-SHA-512 (certificates made by laminar-test-certs, the user by
// `laminar user create`). kafkajs produces and consumes over both, and a wrong password is
// refused with its SASL authentication error.

import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'

import { Kafka, logLevel } from 'kafkajs'

import { BrokerProcess, controllerBinary } from './lib/broker.mjs'
import { uniqueTopic, waitFor } from './lib/kafka.mjs'

const binaries = path.dirname(controllerBinary())

function client(brokers, { ssl, sasl }) {
  return new Kafka({
    clientId: 'laminar-node-security', brokers: [brokers], ssl, sasl,
    logLevel: logLevel.NOTHING, connectionTimeout: 10_000, requestTimeout: 15_000,
    retry: { retries: 2, initialRetryTime: 200 },
  })
}

async function roundTrip(kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }] })
  await admin.disconnect()
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, acks: -1, messages: Array.from({ length: 20 }, (_, i) => ({ value: `js ${i}` })) })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: uniqueTopic('security-group') })
  const values = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { values.push(message.value.toString()) } })
    await waitFor(() => values.length >= 20, () => `20 records (have ${values.length})`)
  } finally {
    await consumer.disconnect()
  }
  assert.deepEqual(values, Array.from({ length: 20 }, (_, i) => `js ${i}`))
}

describe('kafkajs over SSL and SASL_SSL', () => {
  let broker, certs, ca
  before(async () => {
    certs = mkdtempSync(path.join(tmpdir(), 'laminar-node-certs-'))
    execFileSync(path.join(binaries, 'laminar-test-certs'), [certs])
    ca = [readFileSync(path.join(certs, 'ca.pem'))]
    broker = await BrokerProcess.start({
      listeners: ['SSL', 'SASL_SSL'],
      overrides: {
        'ssl.keystore.location': path.join(certs, 'server.pem'),
        'ssl.truststore.location': path.join(certs, 'ca.pem'),
        'listener.name.ssl.ssl.client.auth': 'required',
        'sasl.enabled.mechanisms': 'SCRAM-SHA-512',
      },
    })
    execFileSync(path.join(binaries, 'laminar'), ['user', 'create', 'bob', '--brokers', broker.bootstrap],
      { input: 'bob-secret\n' })
  })
  after(async () => { await broker?.stop() })

  it('produces and consumes over SSL with a client certificate', async () => {
    const ssl = { ca, cert: readFileSync(path.join(certs, 'alice.crt')), key: readFileSync(path.join(certs, 'alice.key')) }
    await roundTrip(client(broker.listeners.SSL, { ssl }), uniqueTopic('ssl'))
  })

  it('produces and consumes over SASL_SSL with SCRAM-SHA-512', async () => {
    const sasl = { mechanism: 'scram-sha-512', username: 'bob', password: 'bob-secret' }
    await roundTrip(client(broker.listeners.SASL_SSL, { ssl: { ca }, sasl }), uniqueTopic('sasl-ssl'))
  })

  it('is refused a wrong password', async () => {
    const sasl = { mechanism: 'scram-sha-512', username: 'bob', password: 'not-bobs' }
    const producer = client(broker.listeners.SASL_SSL, { ssl: { ca }, sasl }).producer()
    await assert.rejects(producer.connect(), err => err.name === 'KafkaJSSASLAuthenticationError'
      && !String(err.message).includes('not-bobs'))
  })
})
