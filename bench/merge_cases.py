"""Conversations labelled with the sample_vault note each should merge into (`--merge`), or
with none: the set that chooses vault_brain.importing.MERGE_THRESHOLD (bench/import_merge.py).

Each case is what a person asked a chat assistant: a conversation title and its first
question. `targets` lists the notes it belongs in (several when two notes are equally
right); an empty list means a note of its own. The negatives include near misses: the same
words on another topic (deploying a personal blog, backing up MySQL, another recipe).
Written for this benchmark.
"""

from __future__ import annotations

DEPLOY = "How-to/Deploy to production.md"
BACKUP = "How-to/Postgres backup and restore.md"
UPGRADE = "Projects/Postgres Upgrade.md"
INCIDENT = "Meetings/2026-11-25 Incident review - checkout outage.md"
BILLING = "Projects/Billing Migration.md"
BILLING_SYNC = "Meetings/2026-11-26 Billing migration sync.md"
ROADMAP = "Projects/Platform Roadmap 2027.md"
SHANGHAI = "Meetings/2026-11-27 与上海团队同步.md"

# (title, first question, notes it belongs in)
CASES: list[tuple[str, str, list[str]]] = [
    # --- should merge -----------------------------------------------------------------
    (
        "Aborting an Argo canary",
        "How do I abort a canary rollout in Argo Rollouts and roll back a bad production deploy?",
        [DEPLOY],
    ),
    (
        "pgBackRest restore drill",
        "How do I restore pg-main from a pgBackRest backup to a point in time for a restore drill?",
        [BACKUP],
    ),
    (
        "pg_upgrade --link rollback plan",
        "If we run pg_upgrade --link for the Postgres 14 to 16 upgrade, what is our rollback plan?",
        [UPGRADE],
    ),
    (
        "Checkout outage retry storm",
        "Help me explain why the payment-service 4.12 retry change caused HTTP 503s during "
        "the checkout outage.",
        [INCIDENT],
    ),
    (
        "Proration rounding in Stripe",
        "How should we handle proration rounding differences when we migrate subscriptions "
        "from Ledger to Stripe Billing?",
        [BILLING, BILLING_SYNC],
    ),
    (
        "Burn-rate alerts",
        "How do I set up multiwindow burn-rate alerts for the pay invoice SLO with "
        "Prometheus and Grafana?",
        ["Projects/Observability Revamp.md"],
    ),
    (
        "Fusing tsvector and pgvector",
        "How do we fuse tsvector full-text search and pgvector results with reciprocal rank "
        "fusion for invoice search?",
        ["Projects/Project Alpha.md"],
    ),
    (
        "Before tagging an app release",
        "What do we have to do a week before tagging a release of the iOS and Android apps?",
        ["How-to/Release checklist.md"],
    ),
    (
        "When does on-call escalate",
        "When does PagerDuty escalate to the secondary on call, and what counts as a Sev-1?",
        ["How-to/On-call handbook.md"],
    ),
    (
        "番茄炒蛋",
        "番茄炒蛋怎么做才好吃？先炒鸡蛋还是先炒番茄？",
        ["How-to/番茄炒蛋.md"],
    ),
    (
        "Debezium to ClickHouse",
        "How should Li Wei's team stream invoice changes with Debezium and Kafka into ClickHouse?",
        [SHANGHAI, ROADMAP, "People/Li Wei.md"],
    ),
    (
        "Reliability theme for 2027",
        "Help me write the reliability theme of the Platform Roadmap 2027 with goals per quarter.",
        [ROADMAP],
    ),
    (
        "Small teams and on-call",
        "Will Larson says teams of fewer than four are fragile for on-call. What is his "
        "argument in An Elegant Puzzle?",
        ["Reading/An Elegant Puzzle.md"],
    ),
    (
        "Percentiles not averages",
        "Why does Designing Data-Intensive Applications say to measure p99 latency instead "
        "of the average?",
        ["Reading/Designing Data-Intensive Applications.md"],
    ),
    (
        "Brooks's law",
        "Explain Brooks's law from The Mythical Man-Month: why does adding people to a late "
        "project make it later?",
        ["Reading/Мифический человеко-месяц.md"],
    ),
    (
        "缓存行与局部性",
        "为什么按行遍历二维数组比按列遍历快？讲讲缓存行和局部性原理。",
        ["Reading/深入理解计算机系统 读书笔记.md"],
    ),
    (
        "Maria's path to staff",
        "What should Maria Ivanova work on to grow towards staff engineer? She runs the "
        "billing backfill.",
        ["People/Maria Ivanova.md", "Meetings/2026-11-24 1-1 Maria.md"],
    ),
    (
        "Change freeze before cutover",
        "Priya Nair wants a hard change freeze from 8 February before the billing cutover. "
        "Is that reasonable?",
        ["People/Priya Nair.md", BILLING],
    ),
    (
        "Миграции ждут Машу",
        "Ретроспектива спринта 47: как сделать так, чтобы миграции базы данных не ждали "
        "только Машу?",
        ["Meetings/2026-11-27 Ретроспектива спринта 47.md"],
    ),
    (
        "Приоритеты на Q1",
        "Планирование Q1 2027: какие приоритеты поставить команде Platform до "
        "переключения биллинга?",
        ["Meetings/2026-12-01 Планирование Q1.md", ROADMAP],
    ),
    (
        "Deploy count script",
        "Improve my Python script that counts production deploys per service from git log "
        "for the DORA numbers.",
        ["How-to/Python and shell snippets.md"],
    ),
    (
        "Design work for Tom",
        "Tom Becker wants more design work and less toil. Which projects could he lead, "
        "like automating the restore drill?",
        ["People/Tom Becker.md"],
    ),
    (
        "5xx rate in the canary",
        "Add the 5xx error rate to our Argo Rollouts canary analysis template so a failing "
        "release cannot pass.",
        [DEPLOY, INCIDENT],
    ),
    # --- should get a note of its own -------------------------------------------------
    ("Sourdough starter", "My sourdough starter smells of acetone. What went wrong?", []),
    ("Spanish subjunctive", "When do I use the subjunctive in Spanish after 'ojalá'?", []),
    (
        "Hugo blog on Netlify",
        "How do I deploy my personal Hugo blog to Netlify with a custom domain?",
        [],
    ),
    (
        "mysqldump flags",
        "Which mysqldump flags should I use to back up the small MySQL database of my "
        "WordPress site?",
        [],
    ),
    ("A scarf pattern", "Can you give me an easy knitting pattern for a ribbed scarf?", []),
    (
        "Home office deduction",
        "How much can I deduct for a home office on my German tax return?",
        [],
    ),
    ("useEffect cleanup", "When does React run the cleanup function of useEffect?", []),
    ("First marathon", "Make me a 16-week training plan for my first marathon.", []),
    ("iOS update", "Should I update my old iPhone to the newest iOS or wait?", []),
    ("Pizza dough", "What hydration should Neapolitan pizza dough have for a home oven?", []),
    (
        "Kafka rebalancing",
        "Why does my Java Kafka consumer group keep rebalancing every few minutes?",
        [],
    ),
    ("Used car", "What should I check before buying a used car with 150,000 km?", []),
    (
        "asyncio TaskGroup",
        "In Python, what is the difference between asyncio.gather and a TaskGroup?",
        [],
    ),
    ("Borrow checker", "Why does the Rust borrow checker reject my struct with a reference?", []),
    ("Lisbon weekend", "Plan a relaxed weekend in Lisbon for two people in April.", []),
    (
        "k3s autoscaling",
        "How do I add a cluster autoscaler to my hobby k3s cluster on Raspberry Pis?",
        [],
    ),
    ("Birthday poem", "Write a short birthday poem for my mother, who loves gardening.", []),
    ("Salary talk", "How do I negotiate the salary for a new job offer?", []),
    ("Dripping tap", "How do I fix a kitchen tap that keeps dripping?", []),
    ("SQLite WAL", "What does WAL mode change in SQLite, and when should I turn it on?", []),
    ("Мастер и Маргарита", "О чём роман «Мастер и Маргарита» и почему его так любят?", []),
    ("学日语五十音", "怎么才能快速记住日语的五十音？", []),
]
