<?php
/**
 * The delivery part of the settings screen: how WebP/AVIF copies reach browsers (<picture>, server
 * rewrite rules, or off), <picture> per context, the server rules (Apache, written for the owner; the
 * nginx snippet, shown to copy) and the last delivery self-test's report.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Validates the delivery fields of a submitted form into $settings.
 *
 * @param array $input    The submitted fields.
 * @param array $settings The settings being built (changed in place).
 * @return array field => message for bad input.
 */
function compresso_validate_delivery_settings( array $input, array &$settings ) {
	$errors = array();
	if ( isset( $input['delivery'] ) ) {
		$delivery = (string) $input['delivery'];
		if ( in_array( $delivery, array( 'picture', 'rewrite', 'off' ), true ) ) {
			$settings['delivery'] = $delivery;
		} else {
			$errors['delivery'] = sprintf(
				/* translators: %s: what was received */
				__( 'Delivery: expected "picture", "rewrite" or "off", received "%s".', 'compresso' ),
				$delivery
			);
		}
	}
	// The per-context switches are on the form only together with the delivery choice.
	if ( isset( $input['delivery'] ) ) {
		$settings['picture_content']    = ! empty( $input['picture_content'] );
		$settings['picture_attachment'] = ! empty( $input['picture_attachment'] );
	}
	return $errors;
}

/**
 * The delivery rows of the settings table.
 *
 * @param array $settings The plugin's settings.
 */
function compresso_render_delivery_rows( array $settings ) {
	$choices = array(
		'picture' => array(
			__( '<picture> in the page (works on every server and through every cache or CDN)', 'compresso' ),
			__( 'Each image is wrapped in <picture> with the WebP/AVIF copies as sources; the <img> keeps all its classes, styles and attributes.', 'compresso' ),
		),
		'rewrite' => array(
			__( 'Server rewrite (same image address, the server picks the format)', 'compresso' ),
			__( 'The page is not changed; the web server answers file.jpg with file.jpg.webp or .avif to browsers that take it. Needs the rules below in effect, and a cache or CDN that respects "Vary: Accept". Checked when you save.', 'compresso' ),
		),
		'off'     => array(
			__( 'Off (copies are made but not served)', 'compresso' ),
			'',
		),
	);
	?>
	<tr>
		<th scope="row"><?php esc_html_e( 'WebP/AVIF delivery', 'compresso' ); ?></th>
		<td><fieldset class="compresso-delivery">
			<legend class="screen-reader-text"><?php esc_html_e( 'How WebP/AVIF copies reach browsers', 'compresso' ); ?></legend>
			<?php foreach ( $choices as $value => $text ) : ?>
				<label for="compresso-delivery-<?php echo esc_attr( $value ); ?>">
					<input type="radio" id="compresso-delivery-<?php echo esc_attr( $value ); ?>" name="compresso[delivery]" value="<?php echo esc_attr( $value ); ?>" <?php checked( $settings['delivery'], $value ); ?> />
					<?php echo esc_html( $text[0] ); ?>
				</label>
				<?php if ( '' !== $text[1] ) : ?>
					<p class="description"><?php echo esc_html( $text[1] ); ?></p>
				<?php endif; ?>
				<br />
			<?php endforeach; ?>
		</fieldset></td>
	</tr>
	<tr>
		<th scope="row"><?php esc_html_e( '<picture> is used for', 'compresso' ); ?></th>
		<td><fieldset>
			<legend class="screen-reader-text"><?php esc_html_e( 'Where <picture> is used', 'compresso' ); ?></legend>
			<label for="compresso-picture-content"><input type="checkbox" id="compresso-picture-content" name="compresso[picture_content]" value="1" <?php checked( ! empty( $settings['picture_content'] ) ); ?> /> <?php esc_html_e( 'Images in posts and pages', 'compresso' ); ?></label><br />
			<label for="compresso-picture-attachment"><input type="checkbox" id="compresso-picture-attachment" name="compresso[picture_attachment]" value="1" <?php checked( ! empty( $settings['picture_attachment'] ) ); ?> /> <?php esc_html_e( 'Images your theme prints (featured images, galleries)', 'compresso' ); ?></label>
			<p class="description"><?php esc_html_e( 'Turn one off if a page builder or theme styles it differently with <picture>. Developers can decide per image with the compresso_picture_enabled filter.', 'compresso' ); ?></p>
		</fieldset></td>
	</tr>
	<?php
}

/**
 * Below the form: the server rules and the last self-test's report.
 */
function compresso_render_delivery_report() {
	$settings = compresso_get_settings();
	$formats  = Compresso_Rewrite::formats_of( $settings );
	$report   = get_option( Compresso_Self_Test::OPTION );
	?>
	<h2 id="compresso-delivery-check"><?php esc_html_e( 'What browsers receive', 'compresso' ); ?></h2>
	<?php if ( is_array( $report ) && isset( $report['verdict'] ) ) : ?>
		<div class="compresso-delivery-report" data-verdict="<?php echo esc_attr( $report['verdict'] ); ?>">
			<p><strong><?php echo esc_html( isset( $report['message'] ) ? $report['message'] : Compresso_Self_Test::message( $report['verdict'], ! empty( $report['switched'] ) ) ); ?></strong></p>
			<?php if ( ! empty( $report['checks'] ) ) : ?>
				<p>
					<?php
					printf(
						/* translators: 1: image address, 2: date and time */
						esc_html__( 'Checked %2$s with %1$s, through the address visitors use.', 'compresso' ),
						'<code style="word-break:break-all">' . esc_html( $report['url'] ) . '</code>',
						esc_html( wp_date( get_option( 'date_format' ) . ' ' . get_option( 'time_format' ), (int) $report['time'] ) )
					);
					?>
				</p>
				<div class="compresso-table-scroll" style="overflow-x:auto">
				<table class="widefat striped compresso-delivery-checks">
					<thead><tr>
						<th scope="col"><?php esc_html_e( 'Request', 'compresso' ); ?></th>
						<th scope="col"><?php esc_html_e( 'Expected', 'compresso' ); ?></th>
						<th scope="col"><?php esc_html_e( 'Received', 'compresso' ); ?></th>
						<th scope="col"><?php esc_html_e( 'Vary', 'compresso' ); ?></th>
						<th scope="col"><?php esc_html_e( 'Cache', 'compresso' ); ?></th>
					</tr></thead>
					<tbody>
					<?php foreach ( $report['checks'] as $check ) : ?>
						<tr data-check="<?php echo esc_attr( $check['key'] ); ?>">
							<td><?php echo esc_html( $check['label'] ); ?></td>
							<td><?php echo esc_html( $check['expected'] ); ?></td>
							<td><?php echo esc_html( '' !== $check['error'] ? $check['error'] : $check['status'] . ' ' . $check['type'] ); ?><?php echo $check['type'] === $check['expected'] && '' === $check['error'] ? '' : ' <strong>✗</strong>'; ?></td>
							<td><?php echo esc_html( '' !== $check['vary'] ? $check['vary'] : '—' ); ?></td>
							<td><?php echo esc_html( '' !== $check['cache'] ? $check['cache'] : '—' ); ?></td>
						</tr>
					<?php endforeach; ?>
					</tbody>
				</table>
				</div>
			<?php endif; ?>
		</div>
	<?php else : ?>
		<p><?php esc_html_e( 'Save the settings to check what browsers receive from your site.', 'compresso' ); ?></p>
	<?php endif; ?>

	<h2 id="compresso-server-rules"><?php esc_html_e( 'Server rules for rewrite delivery', 'compresso' ); ?></h2>
	<?php if ( ! $formats ) : ?>
		<p><?php esc_html_e( 'Turn on WebP or AVIF copies to see the rules.', 'compresso' ); ?></p>
	<?php else : ?>
		<p>
			<?php
			if ( 'rewrite' === $settings['delivery'] ) {
				printf(
					/* translators: %s: file path */
					esc_html__( 'Apache: the rules are written to %s for you (and removed when you choose another delivery or deactivate the plugin).', 'compresso' ),
					'<code style="word-break:break-all">' . esc_html( Compresso_Rewrite::htaccess_path() ) . '</code>'
				);
			} else {
				esc_html_e( 'Apache: choosing rewrite delivery writes the rules into the uploads folder\'s .htaccess for you.', 'compresso' );
			}
			?>
		</p>
		<p><?php esc_html_e( 'nginx reads no .htaccess: ask your host (or add yourself) this configuration, reload nginx, then save these settings again to check it.', 'compresso' ); ?></p>
		<textarea class="large-text code compresso-nginx-snippet" id="compresso-nginx-snippet" rows="16" readonly aria-label="<?php esc_attr_e( 'nginx configuration for rewrite delivery', 'compresso' ); ?>"><?php echo esc_textarea( Compresso_Rewrite::nginx_snippet( Compresso_Rewrite::uploads_path(), $formats ) ); ?></textarea>
	<?php endif; ?>
	<?php
}
