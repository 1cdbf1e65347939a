//! The phrasing bank of the third planted-facts set: how a user states a constraint, in English
//! and in Chinese, written for this benchmark and read by nothing in `src/`.
//!
//! A constraint is a *kind* (a cost center, a recipient, a price list…) with a value drawn per
//! conversation, stated by one of several clauses of its kind and wrapped in one of several
//! *styles*: a plain sentence, an aside inside another sentence, a correction of an earlier
//! value, a sentence inside a long paragraph, an afterthought after the question. No clause or
//! style carries the words a requirement is usually marked with (must, please, only, 必须, 请,
//! 只…): the user says what holds, not that it is required. The filler around them does use
//! such words now and then, as people do.

use super::Rng;

/// The language of a conversation's user turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    pub fn name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Zh => "Chinese",
        }
    }
}

/// How a constraint is worked into a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A sentence of its own among a few others.
    Plain,
    /// Inside another sentence, in brackets or between dashes.
    Aside,
    /// A correction of a value stated in an earlier turn.
    Correction,
    /// One sentence inside a long paragraph of ordinary talk.
    Paragraph,
    /// After the turn's question, as an afterthought.
    Afterthought,
}

impl Style {
    pub const ALL: [Style; 5] = [
        Style::Plain,
        Style::Aside,
        Style::Correction,
        Style::Paragraph,
        Style::Afterthought,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Style::Plain => "plain sentence",
            Style::Aside => "aside",
            Style::Correction => "correction",
            Style::Paragraph => "inside a long paragraph",
            Style::Afterthought => "afterthought",
        }
    }
}

/// What a constraint is about. Each kind draws its value per conversation, so no value is
/// the same from one salt to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CostCenter,
    Recipient,
    PriceList,
    FileName,
    TestAccounts,
    Currency,
    OneOff,
    OutOfScope,
    DueDate,
    SourceTable,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::CostCenter,
        Kind::Recipient,
        Kind::PriceList,
        Kind::FileName,
        Kind::TestAccounts,
        Kind::Currency,
        Kind::OneOff,
        Kind::OutOfScope,
        Kind::DueDate,
        Kind::SourceTable,
    ];

    /// A value of this kind: (the text put in the clause, the part of it that proves the
    /// constraint is still in the window, a word a later question names it by).
    pub fn value(self, lang: Lang, rng: &mut Rng) -> Value {
        match self {
            Kind::CostCenter => {
                let v = format!("CC-{:04}", 1_000 + rng.below(9_000));
                Value::same(v)
            }
            Kind::Recipient => {
                let first = rng.pick(&["Marta", "Ingrid", "Tomás", "Aiko", "Dmitri", "Leila"]);
                let last = rng.pick(&[
                    "Kowalczyk",
                    "Solberg",
                    "Ferreira",
                    "Tanaka",
                    "Volkov",
                    "Haddad",
                    "Okonkwo",
                    "Lindqvist",
                ]);
                Value {
                    text: format!("{first} {last}"),
                    proof: last.to_owned(),
                }
            }
            Kind::PriceList => Value::same(format!(
                "PL-{}-{}",
                2023 + rng.below(3),
                rng.pick(&["A", "B", "C", "D", "R", "X"])
            )),
            Kind::FileName => {
                let stem = rng.pick(&[
                    "north_q2_review",
                    "margin_check",
                    "board_pack",
                    "regional_bridge",
                    "price_walk",
                    "returns_deep_dive",
                ]);
                Value::same(format!("{stem}_v{}.xlsx", 2 + rng.below(8)))
            }
            Kind::TestAccounts => {
                let a = 100 * (1 + rng.below(90));
                let b = a + 10 + rng.below(80);
                Value {
                    text: format!("ACC-{a:04}|ACC-{b:04}"),
                    proof: format!("ACC-{b:04}"),
                }
            }
            Kind::Currency => Value::same(
                rng.pick(&["CHF", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "SGD"])
                    .to_owned(),
            ),
            Kind::OneOff => Value::same(
                rng.pick(&[
                    "Pacific Partners",
                    "Nordlicht Logistik",
                    "Harbor & Vale",
                    "Qingshan Trading",
                    "Ostrava Steelworks",
                    "Blue Mesa Foods",
                ])
                .to_owned(),
            ),
            Kind::OutOfScope => Value::same(
                rng.pick(&[
                    "Tyrol",
                    "Lombardy",
                    "Jutland",
                    "Andalusia",
                    "Hokkaido",
                    "Yunnan",
                    "Wallonia",
                ])
                .to_owned(),
            ),
            Kind::DueDate => {
                let day = 2 + rng.below(26);
                let month = rng.below(12) as usize;
                const MONTHS: [&str; 12] = [
                    "January",
                    "February",
                    "March",
                    "April",
                    "May",
                    "June",
                    "July",
                    "August",
                    "September",
                    "October",
                    "November",
                    "December",
                ];
                Value::same(match lang {
                    Lang::En => format!("{day} {}", MONTHS[month]),
                    Lang::Zh => format!("{}月{day}日", month + 1),
                })
            }
            Kind::SourceTable => Value::same(format!(
                "{}_{}",
                rng.pick(&[
                    "sales_clean",
                    "orders_final",
                    "ledger_lines",
                    "invoices_gold"
                ]),
                rng.pick(&["v4", "2024q3", "snap7", "rev2"])
            )),
        }
    }

    /// The clauses that state this kind, `{v}` the value (`{a}` and `{b}` the two ends of a
    /// range). A clause is lower-case at its start, without closing punctuation.
    fn clauses(self, lang: Lang) -> &'static [&'static str] {
        match (self, lang) {
            (Kind::CostCenter, Lang::En) => &[
                "the hours go on cost center {v}",
                "{v} is the cost center for all of this",
                "book the time against {v}",
                "finance files this work under {v}",
            ],
            (Kind::CostCenter, Lang::Zh) => &[
                "工时记在成本中心 {v} 上",
                "这次的成本中心是 {v}",
                "费用挂在 {v} 下面",
                "财务把这项工作归到 {v}",
            ],
            (Kind::Recipient, Lang::En) => &[
                "{v} gets the first draft",
                "the draft goes to {v} before anyone else sees it",
                "{v} signs it off first",
                "the first version is for {v}",
            ],
            (Kind::Recipient, Lang::Zh) => &[
                "初稿先给 {v} 看",
                "{v} 先过目",
                "第一版发给 {v}",
                "先让 {v} 签字确认",
            ],
            (Kind::PriceList, Lang::En) => &[
                "unit prices come from price list {v}",
                "everything is priced off {v}",
                "{v} is the price list we go by here",
                "the prices to use are the ones in {v}",
            ],
            (Kind::PriceList, Lang::Zh) => &[
                "单价按价目表 {v} 算",
                "价格以 {v} 为准",
                "用的是 {v} 这份价目表",
                "单价都取自 {v}",
            ],
            (Kind::FileName, Lang::En) => &[
                "the workbook is called {v}",
                "the result gets saved as {v}",
                "the file name is {v}",
                "we keep it in a workbook named {v}",
            ],
            (Kind::FileName, Lang::Zh) => &[
                "工作簿叫 {v}",
                "结果存成 {v}",
                "文件名用 {v}",
                "最后放在 {v} 里",
            ],
            (Kind::TestAccounts, Lang::En) => &[
                "accounts {a} through {b} are test accounts and stay out of the numbers",
                "{a} to {b} are internal test accounts, so leave them aside",
                "the figures go without the test accounts {a}–{b}",
                "the range {a}–{b} is our test data and does not count",
            ],
            (Kind::TestAccounts, Lang::Zh) => &[
                "{a} 到 {b} 是测试账户，不算在数字里",
                "测试账户 {a}–{b} 不计入",
                "{a} 至 {b} 这段是内部测试数据，不算",
                "数字里去掉测试账户 {a}–{b}",
            ],
            (Kind::Currency, Lang::En) => &[
                "amounts are shown in {v} for this audience",
                "the board reads everything in {v}",
                "the figures get converted to {v}",
                "this report is in {v}",
            ],
            (Kind::Currency, Lang::Zh) => &[
                "金额都换成 {v}",
                "这批读者看的是 {v}",
                "数字用 {v} 计",
                "报告的币种是 {v}",
            ],
            (Kind::OneOff, Lang::En) => &[
                "the {v} deal was a one-off",
                "{v} counts as a one-time event",
                "{v} won't repeat, so it sits apart from the trend",
                "the {v} order was a single event and not part of the run rate",
            ],
            (Kind::OneOff, Lang::Zh) => &[
                "{v} 那笔是一次性的",
                "{v} 的单子不会再有，单独看",
                "{v} 属于一次性事件，不算进趋势",
                "{v} 那单只是偶然的一次",
            ],
            (Kind::OutOfScope, Lang::En) => &[
                "{v} is out of scope this time",
                "{v} stays out of every total",
                "{v} is handled by another team, so it stays out",
                "the totals leave {v} aside",
            ],
            (Kind::OutOfScope, Lang::Zh) => &[
                "{v} 这次不在范围内",
                "{v} 由别的团队负责，合计里不算",
                "所有合计都不含 {v}",
                "{v} 的数字这次先放一边",
            ],
            (Kind::DueDate, Lang::En) => &[
                "the board sees this on {v}",
                "it is due on {v}",
                "we present it on {v}",
                "the review meeting is on {v}",
            ],
            (Kind::DueDate, Lang::Zh) => &[
                "{v} 给董事会看",
                "{v} 交稿",
                "我们 {v} 汇报",
                "评审会定在 {v}",
            ],
            (Kind::SourceTable, Lang::En) => &[
                "the numbers come from {v}",
                "{v} is the table of record",
                "the source is {v}, the other tables are stale",
                "everything is read from {v}",
            ],
            (Kind::SourceTable, Lang::Zh) => &[
                "数据以 {v} 为准",
                "从 {v} 取数",
                "{v} 是正式的表，其他表都过时了",
                "数字都来自 {v}",
            ],
        }
    }

    /// How a final question names this kind (for the retrieval measure).
    pub fn question(self, lang: Lang) -> &'static str {
        match (self, lang) {
            (Kind::CostCenter, Lang::En) => "Which cost center did I give you for the hours?",
            (Kind::CostCenter, Lang::Zh) => "我之前说工时记在哪个成本中心？",
            (Kind::Recipient, Lang::En) => "Who gets the first draft again?",
            (Kind::Recipient, Lang::Zh) => "初稿先给谁看来着？",
            (Kind::PriceList, Lang::En) => "Which price list are the unit prices from?",
            (Kind::PriceList, Lang::Zh) => "单价用的是哪份价目表？",
            (Kind::FileName, Lang::En) => "What is the workbook called?",
            (Kind::FileName, Lang::Zh) => "工作簿叫什么名字？",
            (Kind::TestAccounts, Lang::En) => "Which test accounts stay out of the numbers?",
            (Kind::TestAccounts, Lang::Zh) => "哪些测试账户不算？",
            (Kind::Currency, Lang::En) => "Which currency is the report in?",
            (Kind::Currency, Lang::Zh) => "报告用什么币种？",
            (Kind::OneOff, Lang::En) => "Which deal was the one-off?",
            (Kind::OneOff, Lang::Zh) => "哪一笔是一次性的？",
            (Kind::OutOfScope, Lang::En) => "Which area is out of scope?",
            (Kind::OutOfScope, Lang::Zh) => "哪个地区不在范围内？",
            (Kind::DueDate, Lang::En) => "When does the board see this?",
            (Kind::DueDate, Lang::Zh) => "什么时候给董事会看？",
            (Kind::SourceTable, Lang::En) => "Which table do the numbers come from?",
            (Kind::SourceTable, Lang::Zh) => "数据以哪张表为准？",
        }
    }
}

/// A constraint's value.
#[derive(Debug, Clone)]
pub struct Value {
    /// What the clause says (`ACC-0100|ACC-0150` for a range).
    pub text: String,
    /// What must still be in the window.
    pub proof: String,
}

impl Value {
    fn same(v: String) -> Self {
        Self {
            proof: v.clone(),
            text: v,
        }
    }
}

/// `clause` with its value put in.
fn fill(clause: &str, value: &Value) -> String {
    match value.text.split_once('|') {
        Some((a, b)) => clause.replace("{a}", a).replace("{b}", b),
        None => clause.replace("{v}", &value.text),
    }
}

/// A clause of `kind` stating `value`.
pub fn clause(kind: Kind, lang: Lang, value: &Value, rng: &mut Rng) -> String {
    fill(rng.pick(kind.clauses(lang)), value)
}

/// `s` with its first letter in capitals — unless it opens with a name or a code as written
/// (`sales_v4 is…`), which keeps its case.
fn capitalise(s: &str) -> String {
    let first = s.split_whitespace().next().unwrap_or("");
    if first.contains(['_', '.', '-']) || first.chars().any(|c| c.is_ascii_digit()) {
        return s.to_owned();
    }
    let mut cs = s.chars();
    match cs.next() {
        Some(c) => c.to_uppercase().chain(cs).collect(),
        None => String::new(),
    }
}

/// Ordinary talk of an analyst's user: context, doubts, who reads what. Numbers, names and
/// the odd "should" or "need" appear, as they do in real turns.
const FILLER_EN: &[&str] = &[
    "I went through last week's export and a few rows looked odd to me",
    "the regional leads meet on Thursday at 10:30 and will skim this first",
    "sales in the West picked up after the summer campaign, or so it seems",
    "finance booked two invoices twice in May and reversed them later",
    "most of the people reading this are not analysts, so plain words help",
    "my manager keeps asking whether the growth is real or just timing",
    "we switched distributors in July and the data may show it",
    "some stores reported three days late, so the first numbers moved",
    "I care more about the trend than about single orders",
    "last year the same report took us about 2 weeks",
    "the dashboard says 14 % growth but I don't fully trust it yet",
    "Anna from logistics thinks the returns are seasonal",
    "we should probably look at the customer side at some point",
    "there was a price change in the spring that might matter",
    "the warehouse in Leeds had a system outage for a day",
    "I need to understand this well enough to explain it in five minutes",
    "one of the sales reps left in August and her accounts were split",
    "the marketing team ran a promotion in two regions",
    "the old report used a different grouping of products",
    "it would be good to know which products moved the most",
    "I remember the Q2 numbers looked similar, more or less",
    "honestly the spreadsheet we had before was a mess",
    "the auditors asked about the large credit notes last time",
    "our biggest customer changed its ordering pattern this year",
];

const FILLER_ZH: &[&str] = &[
    "我看了上周导出的数据，有几行看起来不太对",
    "区域负责人周四 10:30 开会，会先浏览一下",
    "夏季活动之后 West 的销售好像回升了",
    "财务五月份有两张发票重复入账，后来冲销了",
    "看报告的大多不是分析师，说得直白一点比较好",
    "我的经理一直在问增长是真的还是时间差造成的",
    "我们七月份换了经销商，数据里可能看得出来",
    "有些门店晚报了三天，所以最早的数字有变动",
    "比起单笔订单，我更关心整体趋势",
    "去年同样的报告我们做了大概两周",
    "仪表盘上显示增长 14%，但我还不太相信",
    "物流的 Anna 觉得退货是季节性的",
    "之后应该也看看客户这一侧",
    "春天有过一次调价，可能有影响",
    "Leeds 的仓库系统停了一天",
    "我需要把这个讲清楚，五分钟内能说明白",
    "有位销售八月份离职了，她的客户被分给了别人",
    "市场部在两个区域做了促销",
    "旧报告的产品分组方式不一样",
    "想知道哪些产品变化最大",
    "我记得第二季度的数字差不多",
    "说实话，我们之前用的表格很乱",
    "上次审计问到了几笔大额贷项通知单",
    "我们最大的客户今年改变了下单习惯",
];

/// The questions that close a turn.
const QUESTIONS_EN: &[&str] = &[
    "How did the monthly numbers develop?",
    "Which products carried the change?",
    "What does it look like by channel?",
    "Where are the biggest gaps against last year?",
    "Can you break it down by region?",
    "What stands out in the latest figures?",
    "How do the top customers compare?",
    "Is there anything unusual in the returns?",
];

const QUESTIONS_ZH: &[&str] = &[
    "月度数字是怎么变化的？",
    "哪些产品带来了变化？",
    "按渠道看是什么情况？",
    "和去年相比差距最大的在哪里？",
    "能按区域拆开看吗？",
    "最新的数字里有什么特别的？",
    "主要客户之间比较起来怎么样？",
    "退货里有没有异常？",
];

/// The pieces of text of `lang`.
fn filler(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::En => FILLER_EN,
        Lang::Zh => FILLER_ZH,
    }
}

/// A closing question of a turn.
pub fn question(lang: Lang, rng: &mut Rng) -> &'static str {
    match lang {
        Lang::En => rng.pick(QUESTIONS_EN),
        Lang::Zh => rng.pick(QUESTIONS_ZH),
    }
}

/// `n` sentences of ordinary talk.
fn talk(lang: Lang, n: usize, rng: &mut Rng) -> Vec<String> {
    (0..n)
        .map(|_| {
            let s = rng.pick(filler(lang));
            match lang {
                Lang::En => format!("{}.", capitalise(s)),
                Lang::Zh => format!("{s}。"),
            }
        })
        .collect()
}

/// Joins sentences the way the language writes them.
fn join(lang: Lang, parts: &[String]) -> String {
    match lang {
        Lang::En => parts.join(" "),
        Lang::Zh => parts.concat(),
    }
}

/// A user turn: some talk, the constraints stated in their styles, the question. `long`
/// turns are paragraphs of 8–14 sentences. `earlier` gives, for a correction, the value
/// stated before.
pub fn turn(
    lang: Lang,
    long: bool,
    stated: &[(Kind, Style, Value, Option<Value>)],
    rng: &mut Rng,
) -> String {
    let n = if long {
        8 + rng.below(7) as usize
    } else {
        1 + rng.below(3) as usize
    };
    let mut parts = talk(lang, n, rng);
    let mut after = Vec::new();
    for (kind, style, value, earlier) in stated {
        let c = clause(*kind, lang, value, rng);
        let sentence = match (style, lang) {
            (Style::Plain, Lang::En) => format!("{}.", capitalise(&c)),
            (Style::Plain, Lang::Zh) => format!("{c}。"),
            (Style::Aside, Lang::En) => {
                let host = rng.pick(filler(lang));
                match rng.below(3) {
                    0 => format!("{} ({c}).", capitalise(host)),
                    1 => format!("{} — {c} — as far as I can tell.", capitalise(host)),
                    _ => format!("{}, and by the way {c}.", capitalise(host)),
                }
            }
            (Style::Aside, Lang::Zh) => {
                let host = rng.pick(filler(lang));
                match rng.below(2) {
                    0 => format!("{host}（顺便说一句，{c}）。"),
                    _ => format!("{host}，另外{c}。"),
                }
            }
            (Style::Correction, _) => {
                let old = earlier
                    .as_ref()
                    .map(|e| e.text.split('|').next_back().unwrap_or("").to_owned())
                    .unwrap_or_default();
                match (lang, rng.below(3)) {
                    (Lang::En, 0) => format!("Correction to what I wrote before: {c}."),
                    (Lang::En, 1) => format!("Scratch {old} from earlier, {c}."),
                    (Lang::En, _) => format!("I got that wrong last time: {c}, not {old}."),
                    (Lang::Zh, 0) => format!("更正一下我之前说的：{c}。"),
                    (Lang::Zh, 1) => format!("之前说的 {old} 不对，{c}。"),
                    (Lang::Zh, _) => format!("我上次说错了，{c}，不是 {old}。"),
                }
            }
            (Style::Paragraph, _) => {
                // The clause as one sentence of a long paragraph, wherever it falls.
                let more = talk(lang, 6 + rng.below(5) as usize, rng);
                parts.extend(more);
                match lang {
                    Lang::En => format!("{}.", capitalise(&c)),
                    Lang::Zh => format!("{c}。"),
                }
            }
            (Style::Afterthought, Lang::En) => {
                after.push(match rng.below(2) {
                    0 => format!("Oh, and {c}."),
                    _ => format!("One more thing: {c}."),
                });
                continue;
            }
            (Style::Afterthought, Lang::Zh) => {
                after.push(format!("对了，{c}。"));
                continue;
            }
        };
        let at = rng.below(parts.len() as u64 + 1) as usize;
        parts.insert(at, sentence);
    }
    parts.push(question(lang, rng).to_owned());
    parts.extend(after);
    join(lang, &parts)
}
