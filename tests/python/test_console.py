"""The console (/ui) in a real browser: headless Chromium driven by Selenium through Debian's
chromium-driver, against a real broker holding topics, records and a consumer group. Each page is
loaded and what it shows is checked against the data; a topic is created and deleted through the
forms (the delete confirmed by typing its name), a group's offsets are reset after a preview, a
consumer group of KIP-848's protocol shows its epochs and members, and transactions left open,
committed and aborted by their timeout show in the Transactions view.

Screenshots of the main pages go to $LAMINAR_SCREENSHOTS_DIR (default: a temporary directory);
`LAMINAR_SCREENSHOTS_DIR=docs/console` refreshes the README's pictures."""

import json
import os
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import group_members
from group_members import Member
from laminar_broker import REPO_ROOT, BrokerProcess, free_port

TIMEOUT_S = 15
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"

if not (Path(CHROMEDRIVER).exists() and Path(CHROMIUM).exists()):
    # tests/run.sh installs both; CI must not skip.
    assert not os.environ.get("CI"), "CI must have chromium and chromium-driver (tests/run.sh installs them)"
    pytest.skip("chromium / chromium-driver are not installed", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def console_broker():
    http = f"127.0.0.1:{free_port()}"
    process = BrokerProcess(overrides={"laminar.http.listen": http})
    process.http = http
    yield process
    process.stop()


def api(broker, path):
    with urllib.request.urlopen(f"http://{broker.http}{path}", timeout=TIMEOUT_S) as answer:
        return json.load(answer)


def fill_with_data(broker):
    """`orders`: 3 partitions, 30 records with keys and headers, one binary value; group `billing`
    consumed 12 of them and left (Empty, lag 18)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4", "acks": "all"})
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    client.create_topics([NewTopic("orders", 3, 1)], operation_timeout=TIMEOUT_S)["orders"].result(TIMEOUT_S)
    for i in range(30):
        producer.produce("orders", key=f"customer-{i}", value=f'{{"order": {i}, "item": "widget"}}',
                         partition=i % 3, headers=[("source", b"console-test")])
    producer.produce("orders", key=b"raw", value=bytes([0, 1, 2, 0xff]), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "group.id": "billing", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    taken, deadline = 0, time.time() + TIMEOUT_S * 2
    while taken < 12 and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            taken += 1
    consumer.commit(asynchronous=False)
    consumer.close()  # leaves the group: it is Empty, so its offsets may be reset


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1360,1000", "--hide-scrollbars"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots():
    wanted = os.environ.get("LAMINAR_SCREENSHOTS_DIR")
    directory = Path(wanted) if wanted else Path(tempfile.mkdtemp(prefix="laminar-console-"))
    if not directory.is_absolute():
        directory = REPO_ROOT / directory
    directory.mkdir(parents=True, exist_ok=True)
    yield directory
    if not wanted:
        shutil.rmtree(directory, ignore_errors=True)


def open_page(driver, broker, hash_path):
    driver.get(f"http://{broker.http}/ui{hash_path}")
    WebDriverWait(driver, TIMEOUT_S).until(
        lambda d: d.execute_script("return document.body.dataset.loaded") == hash_path)


def wait_for(driver, css, text=None):
    wait = WebDriverWait(driver, TIMEOUT_S)
    if text is None:
        return wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)))
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
    return driver.find_element(By.CSS_SELECTOR, css)


def cells(row):
    return [c.text for c in row.find_elements(By.TAG_NAME, "td")]


def table_rows(driver, css):
    """The cells' text of every row `css` matches, read in one script: the overview and group pages
    re-render their tables every few seconds, so rows found one call and read the next may be gone."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]),"
        " r => Array.from(r.querySelectorAll('td'), c => c.innerText.trim()));", css)


def text_of(driver, css):
    """One element's text, read in one script (see `table_rows`)."""
    return driver.execute_script("const e = document.querySelector(arguments[0]);"
                                 " return e === null ? null : e.innerText.trim();", css)


def test_console_pages_actions_and_screenshots(console_broker, browser, shots):
    broker, driver = console_broker, browser
    fill_with_data(broker)
    check_overview(driver, broker, shots)
    check_topics_and_create(driver, broker, shots)
    check_one_topic(driver, broker, shots)
    check_groups_and_reset(driver, broker, shots)
    check_consumer_group(driver, broker, shots)
    check_transactions(driver, broker, shots)
    assert not driver.find_element(By.ID, "error").is_displayed(), driver.find_element(By.ID, "error").text
    check_delete(driver, broker)


def check_overview(driver, broker, shots):
    open_page(driver, broker, "#/overview")
    wait_for(driver, "#card-topics")
    assert text_of(driver, "#card-topics") == "2"  # orders and __consumer_offsets
    assert text_of(driver, "#card-brokers") == "1"
    partitions = int(text_of(driver, "#card-partitions").replace(",", ""))
    assert partitions == api(broker, "/v1/overview")["partitions"]
    open_fds, limit = text_of(driver, "#card-descriptors").split(" / ")
    assert int(open_fds.replace(",", "")) > 0 and int(limit.replace(",", "")) > 0
    disk = table_rows(driver, "#log-dirs tbody tr")[0]
    assert disk[0] == broker.data_dir or broker.data_dir in disk[0]
    latency = [row[0] for row in table_rows(driver, "#latency tbody tr")]
    assert "Produce" in latency and "Fetch" in latency
    # The page refreshes every 2 s and the sampler keeps one sample every 2 s while it is open;
    # some traffic meanwhile, for the charts to show.
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    client.create_topics([NewTopic("traffic", 1, 1)], operation_timeout=TIMEOUT_S)["traffic"].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4", "linger.ms": 5})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "group.id": "dashboard", "auto.offset.reset": "earliest"})
    consumer.subscribe(["traffic"])
    deadline = time.time() + TIMEOUT_S
    while len(api(broker, "/v1/history")["samples"]) < 4 and time.time() < deadline:
        for i in range(200):
            producer.produce("traffic", value=b"x" * (100 + i))
        producer.flush(TIMEOUT_S)
        consumer.poll(0.1)
        time.sleep(0.2)  # a steady trickle, not a disk-filling flood
    consumer.close()
    assert len(api(broker, "/v1/history")["samples"]) >= 4
    # A flat line has an empty box, which is never "visible": present is what counts.
    WebDriverWait(driver, TIMEOUT_S).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#charts polyline")))
    time.sleep(2.5)  # one more refresh, so the charts show the samples
    driver.save_screenshot(str(shots / "overview.png"))


def check_topics_and_create(driver, broker, shots):
    open_page(driver, broker, "#/topics")
    row = wait_for(driver, 'tr[data-topic="orders"]')
    name, partitions, replicas, records = cells(row)[:4]
    assert (name, partitions, replicas, records) == ("orders", "3", "1", "31")
    assert wait_for(driver, 'tr[data-topic="traffic"]')
    form = driver.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys("made-in-console")
    count = form.find_element(By.NAME, "partitions")
    count.clear()
    count.send_keys("4")
    form.find_element(By.NAME, "configs").send_keys("retention.ms=3600000")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, "#notice", "Created topic made-in-console.")
    row = wait_for(driver, 'tr[data-topic="made-in-console"]')
    assert cells(row)[1] == "4" and "retention.ms=3600000" in cells(row)[5]
    created = [t for t in api(broker, "/v1/topics")["topics"] if t["name"] == "made-in-console"]
    assert created and created[0]["partitions"] == 4 and created[0]["configs"] == {"retention.ms": "3600000"}
    driver.save_screenshot(str(shots / "topics.png"))


def check_one_topic(driver, broker, shots):
    open_page(driver, broker, "#/topic/orders")
    rows = driver.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")
    assert [cells(r)[:4] for r in rows] == [[str(p), "1", "1", "1"] for p in range(3)]
    assert [cells(r)[5] for r in rows] == ["11", "10", "10"]  # high watermarks (partition 0: 10 + 1 raw)
    assert [cells(r)[6] for r in rows] == ["11", "10", "10"]  # no transaction: all stable
    form = driver.find_element(By.ID, "browse")
    Select(form.find_element(By.NAME, "mode")).select_by_value("offset")
    form.find_element(By.NAME, "at").send_keys("2")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    first = wait_for(driver, '#record-table tr[data-offset="2"]')
    offset, _, key, headers, value = cells(first)
    assert (offset, key, headers) == ("2", "customer-6", "source: console-test")
    assert value == '{"order": 6, "item": "widget"}'
    raw = driver.find_element(By.CSS_SELECTOR, '#record-table tr[data-offset="10"]')
    assert cells(raw)[4] == "000102ff"  # not UTF-8: shown as hex
    Select(form.find_element(By.NAME, "as")).select_by_value("hex")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, '#record-table tr[data-offset="2"]', "637573746f6d65722d36")  # "customer-6"
    Select(form.find_element(By.NAME, "as")).select_by_value("text")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, '#record-table tr[data-offset="2"]', "customer-6")
    configs = {cells(r)[0]: cells(r)[1] for r in driver.find_elements(By.CSS_SELECTOR, "#configs tbody tr")}
    assert configs["cleanup.policy"] == "delete"
    driver.save_screenshot(str(shots / "topic.png"))


def check_groups_and_reset(driver, broker, shots):
    open_page(driver, broker, "#/groups")
    row = wait_for(driver, 'tr[data-group="billing"]')
    group, group_type, state, protocol, committed, lag = cells(row)
    assert (group, group_type, state, protocol) == ("billing", "classic", "Empty", "consumer")
    described = api(broker, "/v1/groups/billing")["offsets"]
    assert int(committed) == len(described) >= 1
    assert int(lag) == sum(o["lag"] for o in described)
    assert sum(o["committed_offset"] for o in described) == 12
    open_page(driver, broker, "#/group/billing")
    wait_for(driver, "#offsets tbody tr")
    offsets = {int(row[1]): row for row in table_rows(driver, "#offsets tbody tr")}
    described = {o["partition"]: o for o in api(broker, "/v1/groups/billing")["offsets"]}
    for partition, row in offsets.items():
        assert row[2] == str(described[partition]["committed_offset"])
        assert row[4] == str(described[partition]["lag"])
    form = driver.find_element(By.ID, "reset-offsets")
    Select(form.find_element(By.NAME, "to")).select_by_value("earliest")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, "#reset-table")
    assert {row[2] for row in table_rows(driver, "#reset-table tbody tr")} == {"0"}
    driver.save_screenshot(str(shots / "group.png"))
    driver.find_element(By.ID, "reset-execute").click()
    wait_for(driver, "#reset-done")
    after = api(broker, "/v1/groups/billing")["offsets"]
    assert after and all(o["committed_offset"] == 0 for o in after if o["topic"] == "orders")


def check_consumer_group(driver, broker, shots):
    """A member of KIP-848's protocol in group `fulfilment`: listed as a consumer group, and its
    page shows the assignor, the epochs and the member with its assigned and target partitions."""
    member = Member(broker.bootstrap, "fulfilment", ["orders"], "console", **{"group.protocol": "consumer"})
    try:
        group_members.wait_for(lambda: len(member.owned()) == 3, TIMEOUT_S * 2, "the member's partitions")
        open_page(driver, broker, "#/groups")
        row = wait_for(driver, 'tr[data-group="fulfilment"]')
        group, group_type, state, protocol = cells(row)[:4]
        assert (group, group_type, state, protocol) == ("fulfilment", "consumer", "Stable", "consumer")
        open_page(driver, broker, "#/group/fulfilment")
        wait_for(driver, "#members tbody tr")
        [row] = table_rows(driver, "#members tbody tr")
        member_id, _, epoch, _, host, assigned, target = row
        assert int(epoch) >= 1 and host == "/127.0.0.1"
        assert assigned == target and "orders" in assigned, row
        described = api(broker, "/v1/groups/fulfilment")
        assert [m["member_id"] for m in described["members"]] == [member_id]
        assert "assignor uniform" in text_of(driver, "#group-epochs")
        driver.save_screenshot(str(shots / "consumer-group.png"))
    finally:
        member.stop()


def transactional_producer(broker, transactional_id, partition, timeout_ms=60000):
    """A producer of `transactional_id` with a transaction begun, one record written to
    `payments` `partition` and acknowledged: still open."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4",
                         "transactional.id": transactional_id, "transaction.timeout.ms": timeout_ms})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("payments", value=f"from {transactional_id}", partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    return producer


def check_transactions(driver, broker, shots):
    """`audit-committed` committed, `billing-open` left open, `cleanup-stale` left open with a
    short timeout: highlighted past half of it, then aborted by the coordinator."""
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    client.create_topics([NewTopic("payments", 3, 1)], operation_timeout=TIMEOUT_S)["payments"].result(TIMEOUT_S)
    committed = transactional_producer(broker, "audit-committed", 0)
    committed.commit_transaction(TIMEOUT_S)
    open_one = transactional_producer(broker, "billing-open", 1)
    stale = transactional_producer(broker, "cleanup-stale", 2, timeout_ms=8000)
    open_page(driver, broker, "#/transactions")
    wait_for(driver, 'tr[data-transaction="billing-open"]')
    [row] = table_rows(driver, 'tr[data-transaction="billing-open"]')
    txn_id, state, producer_id, epoch, age, timeout, _, partitions = row
    assert (txn_id, state, timeout, partitions) == ("billing-open", "Ongoing", "1 min", "payments: 1")
    listed = {t["transactional_id"]: t for t in api(broker, "/v1/transactions")["transactions"]}
    assert [producer_id, epoch] == [str(listed["billing-open"][k]) for k in ("producer_id", "producer_epoch")]
    assert age.endswith(" s")
    assert not driver.find_elements(By.CSS_SELECTOR, 'tr[data-transaction="billing-open"] td.old')
    # Past 4 s of its 8 s, the stale one's age is highlighted; the open ones come first.
    wait_for(driver, 'tr[data-transaction="cleanup-stale"] td.old')
    order = [row[0] for row in table_rows(driver, "#transactions tbody tr")]
    assert order == ["billing-open", "cleanup-stale", "audit-committed"], order
    driver.save_screenshot(str(shots / "transactions.png"))
    wait_for(driver, 'tr[data-transaction="cleanup-stale"]', "CompleteAbort")
    rows = table_rows(driver, "#transactions tbody tr")
    assert [(row[0], row[1]) for row in rows] == [
        ("billing-open", "Ongoing"), ("audit-committed", "CompleteCommit"), ("cleanup-stale", "CompleteAbort")], rows
    Select(driver.find_element(By.CSS_SELECTOR, "#transaction-filter select")).select_by_value("Ongoing")
    WebDriverWait(driver, TIMEOUT_S).until(
        lambda d: d.execute_script("return document.body.dataset.loaded") == "#/transactions/Ongoing")
    assert [row[0] for row in table_rows(driver, "#transactions tbody tr")] == ["billing-open"]
    open_page(driver, broker, "#/overview")
    counts = [text_of(driver, f"#card-txn-{name}") for name in ("ongoing", "committed", "aborted")]
    assert counts == ["1", "1", "1"], counts
    assert text_of(driver, "#card-lso-lag") == "1"  # billing-open's record
    del committed, open_one, stale


def check_delete(driver, broker):
    open_page(driver, broker, "#/topics")
    wait_for(driver, 'button[data-delete="made-in-console"]').click()
    dialog = wait_for(driver, "#confirm-delete")
    dialog.find_element(By.ID, "confirm-name").send_keys("made-in-consol")  # a typo: refused
    dialog.find_element(By.ID, "confirm-delete-button").click()
    wait_for(driver, "#error", "the name does not match")
    dialog.find_element(By.ID, "confirm-name").send_keys("e")
    dialog.find_element(By.ID, "confirm-delete-button").click()
    wait_for(driver, "#notice", "Deleted topic made-in-console.")
    assert not driver.find_elements(By.CSS_SELECTOR, 'tr[data-topic="made-in-console"]')
    assert "made-in-console" not in [t["name"] for t in api(broker, "/v1/topics")["topics"]]
